import { describe, expect, it } from "vitest";
import { redact } from "./http.js";

describe("redact (URLs in job logs)", () => {
  it("drops user info and the query", () => {
    expect(redact("https://u:pw@se.example.org:8443/data/f?authz=secret")).toBe("https://se.example.org:8443/data/f");
  });

  it("names an ARC URL with options after the host, without the options (they may hold keys)", () => {
    expect(redact("https://127.0.0.1:8443;failureallowed=yes/token/f.txt")).toBe("https://127.0.0.1:8443/token/f.txt");
    expect(redact("rucio://rucio.example.org;failureallowed=yes/objectstores/s3+rucio://os.example.org:443/OS/write")).toBe(
      "rucio://rucio.example.org/objectstores/s3+rucio://os.example.org:443/OS/write",
    );
    expect(redact("s3://os.example.org;s3_secret_key=abc/b/k")).toBe("s3://os.example.org/b/k");
    // A malformed option list is dropped as well.
    expect(redact("davs://se.example.org:443;junk/f")).toBe("davs://se.example.org:443/f");
  });

  it("keeps the pilot's checksum metadata at the end of the path", () => {
    expect(redact("davs://se.example.org:443/a/f:checksumtype=adler32:checksumvalue=0badc0de")).toBe(
      "davs://se.example.org:443/a/f:checksumtype=adler32:checksumvalue=0badc0de",
    );
  });

  it("says so for what is no URL", () => {
    expect(redact("not a url")).toBe("<invalid URL>");
  });
});
