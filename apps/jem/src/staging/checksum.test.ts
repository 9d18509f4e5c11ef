import { describe, expect, it } from "vitest";
import { checksummer, parseChecksum, sameDigest } from "./checksum.js";

describe("checksums", () => {
  it("adler32 matches the reference value for 'Wikipedia'", () => {
    const c = checksummer("adler32");
    c.update(Buffer.from("Wiki"));
    c.update(Buffer.from("pedia"));
    expect(c.digest()).toBe("11e60398");
  });
  it("adler32 over large buffers stays in range", () => {
    const c = checksummer("adler32");
    c.update(Buffer.alloc(100_000, 0xff));
    expect(c.digest()).toMatch(/^[0-9a-f]{8}$/);
  });
  it("parses alg:value and compares without leading zeros", () => {
    expect(parseChecksum("ADLER32:0a0b0c0d")).toEqual({ alg: "adler32", expected: "0a0b0c0d" });
    expect(parseChecksum("crc32:1")).toBeUndefined();
    expect(sameDigest("00ab", "ab")).toBe(true);
  });
});
