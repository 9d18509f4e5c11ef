import { describe, expect, it } from "vitest";
import { compileConfig } from "@ce/config";
import { authConfigProblems } from "./config-check.js";

describe("authConfigProblems", () => {
  it("accepts the defaults", () => {
    expect(authConfigProblems(compileConfig({}))).toEqual([]);
  });
  it("names every problem", () => {
    const cfg = compileConfig({
      auth: {
        allow: ["dn:*", "bogus:x"],
        deny: ["nocolon"],
        tokens: {
          issuers: [
            { issuer: "http://idp.example" },
            { issuer: "https://idp.example", jwksUri: "http://idp.example/keys", caFile: "/nonexistent/ca.pem" },
            { issuer: "https://idp.example" },
          ],
          algorithms: [],
        },
      },
      jobs: { queues: [{ name: "q", allow: ["kind:robot"] }] },
    });
    const p = authConfigProblems(cfg).join("\n");
    for (const re of [
      /auth\.allow: rule "bogus:x"/,
      /auth\.deny: rule "nocolon"/,
      /jobs\.queues\[q\]\.allow: rule "kind:robot"/,
      /issuers\[0\]\.issuer: http:\/\/idp\.example is not/,
      /issuers\[1\]\.jwksUri/,
      /issuers\[1\]\.caFile/,
      /listed twice/,
      /no algorithm/,
    ]) {
      expect(p).toMatch(re);
    }
  });
});
