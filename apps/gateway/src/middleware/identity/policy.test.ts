import { describe, expect, it } from "vitest";
import { compileConfig } from "@ce/config";
import type { Identity } from "../../context.js";
import { invalidRules, ruleMatches } from "@ce/mapping";
import { checkAccessPolicy, matchesAny } from "./policy.js";
import { missingScope, OPERATION_SCOPES } from "./scopes.js";
import { tokenGroupFields, vomsGroupFields } from "./groups.js";

const jane: Identity = { subject: "/DC=org/DC=example/CN=Jane Doe", kind: "x509", issuer: "/DC=org/DC=example/CN=Example CA" };
const tok: Identity = {
  subject: "https://idp.example/realm/abc-123",
  kind: "token",
  issuer: "https://idp.example/realm",
  scopes: new Set(["compute.read"]),
  groups: ["/atlas/prod"],
};

describe("VO rules on VOMS and token identities alike (one vocabulary: identity/groups.ts)", () => {
  const vomsJane: Identity = {
    ...jane,
    ...vomsGroupFields([
      {
        vo: "atlas",
        fqans: ["/atlas/Role=pilot/Capability=NULL", "/atlas/lcg1/Role=NULL/Capability=NULL"],
        issuer: "/CN=voms",
        notAfter: new Date(),
      },
    ]),
  };
  const dteamTok: Identity = { ...tok, ...tokenGroupFields(["/dteam", "/atlas/prod"]) };

  it("fills fqans (short form, primary first), groups and vos", () => {
    expect(vomsJane).toMatchObject({ fqans: ["/atlas/Role=pilot", "/atlas/lcg1"], groups: ["/atlas", "/atlas/lcg1"], vos: ["atlas"] });
    expect(dteamTok).toMatchObject({ fqans: ["/dteam", "/atlas/prod"], groups: ["/dteam", "/atlas/prod"], vos: ["dteam", "atlas"] });
  });

  it("auth.deny by role and auth.allow by VO apply to both credentials", () => {
    const cfg = compileConfig({ auth: { allow: ["vo:atlas", "vo:dteam"], deny: ["fqan:/atlas/Role=pilot"] } });
    expect(checkAccessPolicy(cfg, vomsJane)).toMatch(/deny rule fqan:\/atlas\/Role=pilot/);
    expect(checkAccessPolicy(cfg, dteamTok)).toBeUndefined();
    expect(checkAccessPolicy(cfg, jane)).toMatch(/matches no allow rule/);
    expect(matchesAny(["group:/atlas/lcg1"], vomsJane)).toBe(true);
    expect(matchesAny(["group:/atlas/lcg1"], dteamTok)).toBe(false);
  });
});

describe("access rules", () => {
  it.each([
    ["*", jane, true],
    ["dn:/DC=org/DC=example/CN=*", jane, true],
    ["dn:/DC=org/DC=example/CN=John*", jane, false],
    ["dn:*", tok, false],
    ["ca:/DC=org/DC=example/CN=Example CA", jane, true],
    ["iss:https://idp.example/realm", tok, true],
    ["iss:https://idp.example/realm/", tok, false],
    ["sub:https://idp.example/realm/*", tok, true],
    ["group:/atlas/prod", tok, true],
    ["group:/atlas", tok, false], // WLCG groups are not hierarchical
    ["scope:compute.read", tok, true],
    ["scope:compute.create", tok, false],
    ["kind:token", tok, true],
    ["kind:token", jane, false],
    ["dn:/DC=org/DC=example/CN=Jane Doe", jane, true],
    ["dn:/DC=org/DC=example/CN=Jane.Doe", jane, false], // `.` is literal
    ["bogus:x", jane, false],
    ["dn:", jane, false],
  ] as const)("%s vs %s", (rule, id, expected) => {
    expect(ruleMatches(rule, id)).toBe(expected);
  });

  it("reports rules that do not parse", () => {
    expect(invalidRules(["*", "dn:/CN=*", "bogus:x", "kind:robot", "nocolon"])).toEqual(["bogus:x", "kind:robot", "nocolon"]);
  });

  it("deny wins, empty allow admits everyone, otherwise an allow rule must match", () => {
    const base = compileConfig({});
    expect(checkAccessPolicy(base, jane)).toBeUndefined();
    const denied = compileConfig({ auth: { deny: ["dn:*Jane*"], allow: ["*"] } });
    expect(checkAccessPolicy(denied, jane)).toMatch(/deny rule dn:\*Jane\*/);
    const allowTokens = compileConfig({ auth: { allow: ["kind:token"] } });
    expect(checkAccessPolicy(allowTokens, tok)).toBeUndefined();
    expect(checkAccessPolicy(allowTokens, jane)).toMatch(/matches no allow rule/);
    expect(matchesAny([], jane)).toBe(false);
  });
});

describe("scopes", () => {
  const cfg = compileConfig({});
  it("maps operation classes to WLCG compute scopes", () => {
    expect(OPERATION_SCOPES).toMatchObject({
      jobinfo: "compute.read",
      jobcreate: "compute.create",
      jobcancel: "compute.cancel",
      jobdelete: "compute.cancel",
      datawrite: "compute.modify",
    });
  });
  it("limits tokens, never X.509 callers", () => {
    expect(missingScope(cfg, tok, "jobinfo")).toBeUndefined();
    expect(missingScope(cfg, tok, "jobcreate")).toBe("compute.create");
    expect(missingScope(cfg, jane, "jobcreate")).toBeUndefined();
    expect(missingScope(compileConfig({ auth: { tokens: { requireScopes: false } } }), tok, "jobcreate")).toBeUndefined();
  });
});
