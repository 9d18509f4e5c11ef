import { describe, expect, it } from "vitest";
import { routingPath } from "../../app.js";
import { parseSessionPath, resolveDotSegments } from "./path.js";

const ROOT = "/arex/rest/1.1/jobs/0b7e2c1a-9f3d-4e2b-8c1d-2a3b4c5d6e7f/session";

describe("parseSessionPath", () => {
  it("resolves inner dot segments and runs of slashes inside the session", () => {
    expect(parseSessionPath(`${ROOT}//a/./b/../c`, ROOT)).toMatchObject({ segments: ["a", "c"], normalized: "/a/c" });
  });
  it.each([
    ["..", "climbs above"],
    ["a/../..", "climbs above"],
    ["%2e%2e", "percent-encoded dot"],
    ["a%2fb", "encoded slash"],
    ["a%00", "NUL"],
    ["%c0%ae%c0%ae", "malformed percent-encoding"],
    ["a\\b", "backslash"],
  ])("refuses %s with a reason naming the problem", (rel, reason) => {
    expect(() => parseSessionPath(`${ROOT}/${rel}`, ROOT)).toThrow(reason);
  });
});

describe("resolveDotSegments", () => {
  it.each([
    ["/a/b/../c", "/a/c"],
    ["/a/./b/.", "/a/b/"],
    ["/../../a", "/a"],
    ["/a/..", "/"],
    ["/a/...", "/a/..."],
    ["/a/.x/b/../c", "/a/.x/c"],
  ])("%s → %s", (inp, out) => expect(resolveDotSegments(inp)).toBe(out));
});

describe("routingPath", () => {
  // Finding of tests/fuzz/session-path.fuzz.test.ts: a raw `#` stayed in the routed path, so the
  // router saw `…/jobs/<id>#/…` while the session path parser (raw target, cut at `?`/`#`) did not.
  it("routes neither the query nor a fragment", () => {
    expect(routingPath(new Request(`https://h${ROOT}/a#/../x?y`))).toBe(`${ROOT}/a`);
    expect(routingPath(new Request("https://h/arex/rest/1.1/jobs/?x=/a#b"))).toBe("/arex/rest/1.1/jobs");
    expect(routingPath(new Request("https://h//arex///rest/"))).toBe("/arex/rest");
  });
  // Finding of the same target: Node's URL parser (Ada) keeps dot segments after a
  // segment starting with "." — new URL("https://h/a/.x/b/../c").pathname is "/a/.x/b/../c".
  it("resolves dot segments the URL parser left in", () => {
    expect(routingPath(new Request("https://h/arex/rest/1.1/.x/../jobs/.y/./../x/"))).toBe("/arex/rest/1.1/jobs/x");
    expect(routingPath(new Request("https://h/.x/../../../arex/rest"))).toBe("/arex/rest");
    expect(routingPath(new Request("https://h/.x/%2E%2e/arex/rest/1.1/jobs/.x/%2e"))).toBe("/arex/rest/1.1/jobs/.x");
  });
});
