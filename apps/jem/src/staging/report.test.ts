import { describe, expect, it } from "vitest";
import { fileFacts, outputStatusLine, outputStatusNames, schemeOf } from "./report.js";

describe("staging reports", () => {
  it("labels URLs by scheme, local paths as file, anything else as other", () => {
    expect(
      ["davs://h/x", "ROOT://h//x", "rucio://r/replicas/s/n", "/cvmfs/a/b", "file:///cvmfs/a", "srm://h/x", "nonsense"].map(schemeOf),
    ).toEqual(["davs", "root", "rucio", "file", "file", "other", "other"]);
  });

  it("writes output_status as ARC's FileData: escaped path, URL with the verified checksum as metadata", () => {
    const line = outputStatusLine("dir/my file\\x", "root://h:1094//a/b;overwrite=yes?x=1", "adler32:0a1b2c3d");
    expect(line).toBe("/dir/my\\ file\\\\x root://h:1094//a/b;overwrite=yes:checksumtype=adler32:checksumvalue=0a1b2c3d");
    // A URL that names its checksum already (the pilot's output.list) is kept as it is.
    expect(outputStatusLine("f", "davs://h/f:checksumtype=adler32:checksumvalue=01", "adler32:01")).toBe(
      "/f davs://h/f:checksumtype=adler32:checksumvalue=01",
    );
    expect(outputStatusLine("f", "https://h/f", undefined)).toBe("/f https://h/f");
    expect(outputStatusNames(`${line}\n/f https://h/f\n/plain\n\n`)).toEqual(new Set(["dir/my file\\x", "f", "plain"]));
  });

  it("states replica, bytes, checksum and duration", () => {
    const start = new Date(1_000);
    expect(fileFacts({ replica: "davs://u:p@h/x?sig=1", bytes: 5, checksum: "adler32:01", start }, 3_500)).toBe(
      "resolved by Rucio to davs://h/x, 5 bytes, adler32:01, 2.50 s",
    );
    expect(fileFacts({ bytes: 0, start }, 1_000)).toBe("0 bytes, 0.00 s");
  });
});
