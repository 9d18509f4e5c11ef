import { describe, expect, it } from "vitest";
import { compileConfig, ConfigError } from "@ce/config";

const boot = (mapping: unknown) => () => compileConfig({ mapping } as never);

describe("mapping configuration", () => {
  it("is off when absent and has defaults when present", () => {
    expect(compileConfig({}).mapping).toBeUndefined();
    expect(compileConfig({ mapping: {} }).mapping).toEqual({
      rules: [],
      onNoMatch: "refuse",
      minUid: 1000,
      gridmapCheckMs: 5000,
      leaseGraceSeconds: 600,
    });
  });

  it.each([
    [
      {
        rules: [
          { match: "dn:*", user: "a" },
          { match: "dm:/CN=x", user: "b" },
        ],
      },
      'mapping.rules.1.match: match "dm:/CN=x" is not',
    ],
    [{ rules: [{ match: [], user: "a" }] }, "mapping.rules.0.match"],
    [{ rules: [{ match: "*" }] }, "mapping.rules.0: a rule needs exactly one target of user, pool, gridmap (found 0)"],
    [
      { rules: [{ match: "*", user: "a", gridmap: "/x" }] },
      "mapping.rules.0: a rule needs exactly one target of user, pool, gridmap (found 2)",
    ],
    [
      { rules: [{ match: "*", users: "a" }] },
      'unknown key "mapping.rules.0.users" in the configuration (did you mean "mapping.rules.0.user"?)',
    ],
    [{ rules: [{ match: "*", user: "0day" }] }, "mapping.rules.0.user: not a valid account name"],
    [
      {
        rules: [
          { match: "*", user: "a" },
          { match: "*", pool: { prefix: "g", from: 5, to: 1 } },
        ],
      },
      "mapping.rules.1.pool: pool `to` is below `from`",
    ],
    [
      { rules: [{ match: "*", pool: { accounts: ["a"], prefix: "g", from: 1, to: 2 } }] },
      "mapping.rules.0.pool: a pool has either `accounts` or `prefix`+`from`+`to`, not both",
    ],
    [{ rules: [{ match: "*", pool: { prefix: "g" } }] }, "mapping.rules.0.pool: a pool needs `accounts` or all of `prefix`, `from`, `to`"],
    [{ rules: [{ match: "*", pool: { accounts: ["a", "a"] } }] }, "mapping.rules.0.pool: a pool lists an account twice"],
    [{ rules: [{ match: "*", gridmap: "etc/grid-mapfile" }] }, "mapping.rules.0.gridmap: gridmap must be an absolute path"],
    [{ onNoMatch: "allow" }, "mapping.onNoMatch"],
    [{ minUid: 0 }, "mapping.minUid"],
  ])("refuses %j naming the rule", (mapping, message) => {
    expect(boot(mapping)).toThrow(ConfigError);
    expect(boot(mapping)).toThrow(message);
  });

  it("accepts every target kind and match form", () => {
    const c = compileConfig({
      mapping: {
        rules: [
          { name: "atlas prod", match: ["vo:atlas", "fqan:/atlas/Role=production/*"], user: "atlasprd" },
          { match: "iss:https://idp.example", pool: { prefix: "grid", from: 1, to: 50, width: 3 } },
          { match: "dn:*", gridmap: "/etc/grid-security/grid-mapfile" },
        ],
        onNoMatch: { user: "nobody1" },
      },
    } as never);
    expect(c.mapping?.rules).toHaveLength(3);
  });
});
