import { describe, expect, it } from "vitest";
import { SessionFsError } from "@ce/sessionfs";
import { blameAll, blameOf, parseStageInFailure } from "./blame.js";
import { DestinationRefused } from "./destinations.js";
import { TransferError } from "./http.js";

describe("whose a failed transfer is", () => {
  it("4xx, a refused destination, a refused protocol or checksum, a missing output: the user's", () => {
    expect(blameOf(new TransferError("GET x: HTTP 404", false, 404))).toBe("user");
    expect(blameOf(new TransferError("PUT x: HTTP 401", false, 401))).toBe("user");
    expect(blameOf(new DestinationRefused("127.0.0.1 is loopback"))).toBe("user");
    expect(blameOf(new TransferError("md5 checksum mismatch", false))).toBe("user");
    expect(blameOf(new SessionFsError("missing", "/out.txt"))).toBe("user");
  });
  it("5xx, timeouts and throttling after the retries, and anything unknown: the site's", () => {
    expect(blameOf(new TransferError("GET x: HTTP 503", true, 503))).toBe("internal");
    expect(blameOf(new TransferError("GET x: HTTP 429", true, 429))).toBe("internal");
    expect(blameOf(new TransferError("connect timeout", true))).toBe("internal");
    expect(blameOf(new Error("EIO"))).toBe("internal");
  });
  it("a set of failures is the user's only when each one is", () => {
    expect(blameAll(["user", "user"])).toBe("user");
    expect(blameAll(["user", "internal"])).toBe("internal");
    expect(blameAll([])).toBe("internal");
  });
  it("reads stagein.failed as JSON, and an older plain text as the site's", () => {
    expect(parseStageInFailure('{"text":"a: HTTP 404","cause":"user"}')).toEqual({ text: "a: HTTP 404", cause: "user" });
    expect(parseStageInFailure("a: HTTP 500\n")).toEqual({ text: "a: HTTP 500", cause: "internal" });
    expect(parseStageInFailure(undefined)).toBeUndefined();
  });
});
