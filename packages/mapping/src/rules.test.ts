import { describe, expect, it } from "vitest";
import { MAPPING_MATCH } from "@ce/config";
import { allMatch, fqanForms, invalidRules, type MatchIdentity, ruleMatches, shortFqan } from "./rules.js";

const jane: MatchIdentity = {
  subject: "/DC=org/DC=example/CN=Jane Doe",
  kind: "x509",
  issuer: "/DC=org/CN=Example CA",
  vos: ["atlas"],
  fqans: ["/atlas/Role=production/Capability=NULL", "/atlas"],
};
const tok: MatchIdentity = { subject: "https://idp.example/abc-123", kind: "token", issuer: "https://idp.example", groups: ["/cms/uscms"] };

describe("rule matcher", () => {
  it.each([
    ["vo:atlas", jane, true],
    ["vo:atl*", jane, false], // vo is exact
    ["vo:atlas", tok, false], // no VOMS attributes
    ["fqan:/atlas/Role=production/*", jane, true],
    ["fqan:/atlas/Role=pilot/*", jane, false],
    ["fqan:/atlas", jane, true],
    ["fqan:*", tok, false],
    ["group:/cms", tok, false], // not hierarchical
    ["sub:https://idp.example/abc-*", tok, true],
    ["sub:https://idp.example/abc-*", jane, false],
    ["ca:/DC=org/CN=Example CA", jane, true],
    ["constructor:x", jane, false], // prototype names are not rule kinds
    ["__proto__:x", jane, false],
    // Short and long FQAN forms match either way; VOMS groups and token groups share group:
    ["fqan:/atlas/Role=production", jane, true],
    ["fqan:/atlas/Role=NULL/Capability=NULL", jane, true],
    ["fqan:/atlas/lcg1", { ...jane, fqans: ["/atlas/lcg1/Role=NULL/Capability=NULL"] }, true],
    ["fqan:/cms/uscms", { ...tok, fqans: ["/cms/uscms"] }, true],
    ["group:/atlas", { ...jane, groups: ["/atlas"] }, true],
  ] as const)("%s", (rule, id, expected) => {
    expect(ruleMatches(rule, id)).toBe(expected);
  });

  it("FQAN forms", () => {
    expect(shortFqan("/atlas/lcg1/Role=NULL/Capability=NULL")).toBe("/atlas/lcg1");
    expect(shortFqan("/atlas/Role=production/Capability=NULL")).toBe("/atlas/Role=production");
    expect(fqanForms("/atlas")).toEqual(["/atlas", "/atlas/Role=NULL/Capability=NULL"]);
  });

  it("a match list needs every condition; an empty one matches nothing", () => {
    expect(allMatch(["iss:https://idp.example", "group:/cms/uscms"], tok)).toBe(true);
    expect(allMatch(["iss:https://idp.example", "group:/atlas"], tok)).toBe(false);
    expect(allMatch([], tok)).toBe(false);
  });

  it("the config schema accepts exactly the mapping matches the matcher parses", () => {
    const samples = [
      "*",
      "dn:/CN=*",
      "ca:x",
      "iss:https://a",
      "sub:a/*",
      "group:/g",
      "vo:atlas",
      "fqan:/atlas/*",
      "kind:x509",
      "kind:token",
      "kind:robot",
      "bogus:x",
      "dn:",
      "nocolon",
      "constructor:x",
      "dn: leading-space",
    ];
    for (const s of samples) {
      const schemaOk = MAPPING_MATCH.test(s);
      if (schemaOk) expect(invalidRules([s]), s).toEqual([]);
    }
    expect(samples.filter((s) => !MAPPING_MATCH.test(s))).toEqual([
      "kind:robot",
      "bogus:x",
      "dn:",
      "nocolon",
      "constructor:x",
      "dn: leading-space",
    ]);
  });
});
