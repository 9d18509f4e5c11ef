import { describe, expect, it } from "vitest";
import { compileConfig } from "@ce/config";
import { crossSiteReason, ownOrigins } from "./index.js";

/** The rule as a table; the routes it guards are exercised in apps/gateway/test/cross-site.test.ts. */
describe("cross-site rule", () => {
  const own = ownOrigins(
    compileConfig({ endpoint: { url: "https://CE.Example.org:443/arex" }, gateway: { extraOrigins: ["https://gw1.example.org:8443/"] } }),
  );

  it("the endpoint's origin and the extra ones, written as a browser writes Origin", () => {
    expect([...own]).toEqual(["https://ce.example.org", "https://gw1.example.org:8443"]);
  });

  it.each([
    [undefined, undefined],
    ["same-origin", undefined],
    ["none", undefined],
    [undefined, "https://ce.example.org"],
    ["same-origin", "https://gw1.example.org:8443"],
  ])("passes Sec-Fetch-Site %s, Origin %s", (site, origin) => {
    expect(crossSiteReason(site, origin, own)).toBeUndefined();
  });

  it.each([
    ["cross-site", undefined, "Sec-Fetch-Site: cross-site"],
    ["same-site", "https://ce.example.org", "Sec-Fetch-Site: same-site"],
    ["same-origin, cross-site", undefined, "Sec-Fetch-Site: same-origin, cross-site"],
    ["", undefined, "Sec-Fetch-Site: "],
    [undefined, "null", "Origin: null"],
    [undefined, "https://ce.example.org:443", "Origin: https://ce.example.org:443"],
    [undefined, "http://ce.example.org", "Origin: http://ce.example.org"],
    [undefined, "https://ce.example.org.evil.example", "Origin: https://ce.example.org.evil.example"],
    [undefined, "https://ce.example.org, https://evil.example", "Origin: https://ce.example.org, https://evil.example"],
    [undefined, "", "Origin:  is not"],
    [
      "same-origin",
      "https://evil.example",
      "Origin: https://evil.example is not this CE's origin (https://ce.example.org, https://gw1.example.org:8443)",
    ],
  ])("refuses Sec-Fetch-Site %j, Origin %j naming %s", (site, origin, named) => {
    expect(crossSiteReason(site, origin, own)).toContain(named);
  });

  it("quotes a hostile value printable and bounded", () => {
    const reason = crossSiteReason(undefined, `https://e.example/${"x".repeat(500)}\u0007`, own)!;
    expect(reason.length).toBeLessThan(250);
    expect(reason).not.toMatch(/[^\x20-\x7e…]/);
  });

  it("gateway.extraOrigins takes origins only: no path, query or other scheme", () => {
    for (const bad of ["https://a.example/arex", "https://a.example?x", "ftp://a.example", "a.example", "https://u@a.example"]) {
      expect(() => compileConfig({ gateway: { extraOrigins: [bad] } }), bad).toThrow(/gateway\.extraOrigins/);
    }
  });
});
