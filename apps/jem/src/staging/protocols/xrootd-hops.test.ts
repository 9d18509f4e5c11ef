import { execa } from "execa";
import { describe, expect, it } from "vitest";
import { nextHop, readToolStderr } from "./xrootd-hops.js";

const from = "root://se.example.org:1094//store/f.root";

describe("xrootd redirect targets", () => {
  it("follows root(s):// servers by name or address, keeping the path and passing the redirect's CGI", () => {
    expect(nextHop(from, { info: "pool1.example.org", port: 1095 })).toBe("root://pool1.example.org:1095//store/f.root");
    expect(nextHop(from, { info: "pool1.example.org?org.dcache.uuid=abc", port: 1095 })).toBe(
      "root://pool1.example.org:1095//store/f.root?org.dcache.uuid=abc",
    );
    expect(nextHop(from, { info: "root://10.1.2.3:2000", port: 0 })).toBe("root://10.1.2.3:2000//store/f.root");
    expect(nextHop(from, { info: "[2001:db8::1]", port: 1094 })).toBe("root://[2001:db8::1]:1094//store/f.root");
    expect(nextHop("roots://se.example.org//f", { info: "roots://pool:1094", port: 0 })).toBe("roots://pool:1094//f");
  });

  it("refuses local files, stdio, other schemes, TLS downgrades and junk, naming the target", () => {
    const refused =
      (info: string, port = 0, src = from) =>
      () =>
        nextHop(src, { info, port });
    expect(refused("file://localhost/etc/shadow")).toThrow(
      /redirected to "file:\/\/localhost\/etc\/shadow", refused: a local file \(file:\/\/\)/,
    );
    expect(refused("file:///etc/cron.d/x")).toThrow(/a local file/);
    expect(refused("/etc/shadow")).toThrow(/refused: a local file/);
    expect(refused("-")).toThrow(/standard input/);
    expect(refused("https://evil.example.org/x")).toThrow(/only root:\/\/ and roots:\/\/ redirects are followed, not https:/);
    expect(refused("root://pool:1094", 0, "roots://se//f")).toThrow(/does not continue without TLS/);
    expect(refused("pool.example.org")).toThrow(/no port/);
    expect(refused("pool example", 1094)).toThrow(/not a host name/);
    expect(refused("a/b", 1094)).toThrow(/not a host name/);
  });

  it("reads the redirect target from XrdCl's Dump line and keeps the tool's own last lines", async () => {
    const log = [
      "[2026-12-02 14:35:26.864553 +0000][Dump   ][XRootD            ] [localhost:33089] Sending message kXR_open (file: /in/x, mode: 00, flags: kXR_open_read )",
      "[2026-12-02 14:35:26.864867 +0000][Dump   ][XRootD            ] [localhost:33089] Got kXR_redirect response to message kXR_open (file: /in/x, mode: 00, flags: kXR_open_read ): file://localhost/tmp/k, port 0",
      "Run: [FATAL] Redirect limit has been reached:  (source)",
    ].join("\n");
    const proc = execa("sh", ["-c", 'printf "%s\\n" "$1" >&2', "sh", log], { stderr: "pipe", buffer: { stderr: false } });
    const out = await readToolStderr(proc);
    await proc;
    expect(out.redirect).toEqual({ info: "file://localhost/tmp/k", port: 0 });
    expect(out.tail).toBe("Run: [FATAL] Redirect limit has been reached:  (source)");
  });
});
