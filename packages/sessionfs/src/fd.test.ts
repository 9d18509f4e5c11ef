import { closeSync, openSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { FdClosedError, FdStolenError, onFdStolen, OwnedFd } from "./fd.js";

describe("OwnedFd", () => {
  it("closes once: a second close never reaches the kernel, so it cannot close a reused number", () => {
    const a = OwnedFd.openSync("/dev/null", 0);
    const n = a.num;
    a.closeSync();
    const other = openSync("/dev/null", "r"); // the lowest free number: the one just released
    expect(other).toBe(n);
    a.closeSync();
    expect(() => closeSync(other)).not.toThrow(); // still open: the second close did nothing
  });

  it("throws FdClosedError on use after close", async () => {
    const a = await OwnedFd.open("/dev/null", 0);
    await a.close();
    expect(a.closed).toBe(true);
    expect(() => a.num).toThrow(FdClosedError);
    expect(() => a.proc).toThrow(/used after it was closed/);
  });

  it("reports EBADF on close as FdStolenError (someone else closed our number), sync and async", async () => {
    const seen: FdStolenError[] = [];
    onFdStolen((e) => seen.push(e));
    try {
      const a = OwnedFd.openSync("/dev/null", 0, undefined, "test file");
      closeSync(a.num); // the bug being detected: a close by a non-owner
      expect(() => a.closeSync()).toThrow(FdStolenError);
      const b = await OwnedFd.open("/dev/null", 0);
      closeSync(b.num);
      await expect(b.close()).rejects.toMatchObject({ code: "FD_STOLEN" });
      expect(seen.map((e) => e.what)).toEqual(["test file", "/dev/null"]);
    } finally {
      onFdStolen(undefined);
    }
  });
});
