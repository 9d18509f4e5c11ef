import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { compileConfig } from "@ce/config";
import { accountProblem, lookupAccounts } from "./accounts.js";
import { MappingConfigError, MappingRefused } from "./errors.js";
import { Mapper } from "./mapper.js";
import type { MatchIdentity } from "./rules.js";
import { TestAccounts } from "./test-accounts.js";

// Real accounts: useradd needs root (CI and the dev VM run the suite as root).
const root = TestAccounts.available();
const acc = new TestAccounts();
const dir = mkdtempSync(join(tmpdir(), "mapper-"));
let redis: Redis;
let u1: string, u2: string, u3: string, pool: string[], sys: string, grp: string;

const jane: MatchIdentity = { subject: "/DC=org/DC=example/CN=Jane Doe", kind: "x509", issuer: "/DC=org/CN=Example CA" };
const john: MatchIdentity = { subject: "/DC=org/DC=other/CN=John", kind: "x509", issuer: "/DC=org/CN=Other CA" };
const tok = (sub: string, groups: string[] = []): MatchIdentity => ({
  subject: `https://idp.example/${sub}`,
  kind: "token",
  issuer: "https://idp.example",
  groups,
});
const voms: MatchIdentity = { ...john, vos: ["atlas"], fqans: ["/atlas/Role=production/Capability=NULL"] };

beforeAll(async () => {
  redis = new Redis(inject("redisUrl"));
  if (!root) return;
  grp = await acc.group("g");
  u1 = await acc.add("u1", { groups: [grp] });
  u2 = await acc.add("u2");
  u3 = await acc.add("u3");
  pool = [await acc.add("p1"), await acc.add("p2")];
  sys = await acc.add("sys", { system: true });
});
afterAll(async () => {
  await acc.remove();
  await redis.quit();
  rmSync(dir, { recursive: true, force: true });
});

const create = (mapping: unknown, opts: { ceUids?: number[]; ceGids?: number[] } = {}) =>
  Mapper.create(compileConfig({ mapping } as never).mapping!, { redis, prefix: `{mapper-${randomBytes(4).toString("hex")}}`, ...opts });

async function problems(mapping: unknown, opts: { ceUids?: number[]; ceGids?: number[] } = {}): Promise<string[]> {
  try {
    await create(mapping, opts);
    return [];
  } catch (e) {
    expect(e).toBeInstanceOf(MappingConfigError);
    return [...(e as MappingConfigError).problems];
  }
}

describe.runIf(root)("account checks", () => {
  it("resolves uid, gid and supplementary groups through getent", async () => {
    const m = await lookupAccounts([u1, "root", `${acc.prefix}nosuch`]);
    const a = m.get(u1)!;
    expect(a.uid).toBeGreaterThanOrEqual(1000);
    expect(a.gid).toBe(100); // users
    expect(a.groups[0]).toBe(100);
    expect(a.groups.length).toBe(2); // + the test group
    expect(m.get("root")).toMatchObject({ uid: 0, gid: 0 });
    expect(m.has(`${acc.prefix}nosuch`)).toBe(false);
  });

  it("refuses root, the CE's own account, system accounts, the root group and missing accounts at boot, naming each", async () => {
    const me = (await lookupAccounts([u2])).get(u2)!;
    const found = await problems(
      {
        rules: [
          { match: "dn:/CN=a", user: "root" },
          { match: "dn:/CN=b", user: u2 },
          { match: "dn:/CN=c", pool: { accounts: [pool[0], sys] } },
          { name: "ghost", match: "dn:/CN=d", user: `${acc.prefix}nosuch` },
          { match: "dn:/CN=e", user: u3 },
        ],
        onNoMatch: { user: "nobody" },
      },
      { ceUids: [me.uid] },
    );
    expect(found).toEqual([
      "mapping.rules[0]: account root is root (uid 0)",
      `mapping.rules[1]: account ${u2} (uid ${me.uid}) is the CE's own account`,
      expect.stringMatching(new RegExp(`^mapping.rules\\[2\\] pool: account ${sys} has uid \\d+, below mapping.minUid 1000$`)),
      `mapping.rules[3] "ghost": account ${acc.prefix}nosuch does not exist`,
    ]); // onNoMatch nobody (uid 65534) is a valid target here
    // nobody (65534) is allowed unless it is the CE's own; minUid raised above it refuses it too.
    expect(await problems({ minUid: 70000, onNoMatch: { user: "nobody" } })).toEqual([
      "mapping.onNoMatch: account nobody has uid 65534, below mapping.minUid 70000",
    ]);
    expect(accountProblem({ account: "x", uid: 5000, gid: 0, groups: [0] }, { minUid: 1000, ceUids: [] })).toBe(
      "account x is in the root group (gid 0)",
    );
  });

  it("refuses an account in the CE's own group (primary or supplementary) at boot, naming it", async () => {
    const a = (await lookupAccounts([u1])).get(u1)!;
    const ceGid = a.groups[1]!; // the test group, a supplementary group of u1 only
    expect(
      await problems(
        {
          rules: [
            { match: "dn:/CN=a", user: u1 },
            { match: "dn:/CN=b", user: u2 },
          ],
        },
        { ceGids: [ceGid] },
      ),
    ).toEqual([
      `mapping.rules[0]: account ${u1} is in the CE's own group (gid ${ceGid}), which shares every job's session and batch directories`,
    ]);
    expect(await problems({ rules: [{ match: "dn:/CN=c", pool: { accounts: pool } }] }, { ceGids: [a.gid] })).toEqual([
      `mapping.rules[0] pool: account ${pool[0]} is in the CE's own group (gid ${a.gid}), which shares every job's session and batch directories`,
      `mapping.rules[0] pool: account ${pool[1]} is in the CE's own group (gid ${a.gid}), which shares every job's session and batch directories`,
    ]);
  });

  it("refuses a grid-mapfile that is missing or maps to a forbidden account at boot, naming file and line", async () => {
    const gm = join(dir, "bad-gridmap");
    writeFileSync(gm, `"/CN=ok" ${u1}\n"/CN=evil" root\n`);
    expect(await problems({ rules: [{ match: "*", gridmap: gm }] })).toEqual([`grid-mapfile ${gm} line 2: account root is root (uid 0)`]);
    expect((await problems({ rules: [{ match: "*", gridmap: join(dir, "missing") }] }))[0]).toMatch(/grid-mapfile .*missing.*ENOENT/);
  });
});

describe.runIf(root)("mapping decisions", () => {
  it("first match wins, in order, for each match kind", async () => {
    const m = await create({
      rules: [
        { name: "prod", match: ["vo:atlas", "fqan:/atlas/Role=production/*"], user: u3 },
        { match: "dn:/DC=org/DC=example/*", user: u1 },
        { match: "ca:/DC=org/CN=Other CA", user: u2 },
        { match: ["iss:https://idp.example", "sub:https://idp.example/svc-*"], user: u3 },
        { match: "group:/cms", user: u2 },
        { match: "*", user: u1 },
      ],
    });
    expect(await m.map(jane)).toMatchObject({ account: u1, rule: "mapping.rules[1]" });
    expect(await m.map(john)).toMatchObject({ account: u2, rule: "mapping.rules[2]" });
    expect(await m.map(voms)).toMatchObject({ account: u3, rule: 'mapping.rules[0] "prod"' }); // earlier rule wins over ca:
    expect(await m.map(tok("svc-7"))).toMatchObject({ account: u3, rule: "mapping.rules[3]" });
    expect(await m.map(tok("alice", ["/cms"]))).toMatchObject({ account: u2, rule: "mapping.rules[4]" });
    expect(await m.map(tok("alice", ["/cms/uscms"]))).toMatchObject({ account: u1, rule: "mapping.rules[5]" });
    const r = await m.map(jane);
    const a = (await lookupAccounts([u1])).get(u1)!;
    expect(r).toEqual({ account: u1, uid: a.uid, gid: 100, groups: a.groups, rule: "mapping.rules[1]" });
  });

  it("no match: refuse with a reason, or the default account", async () => {
    const refuse = await create({ rules: [{ match: "dn:/CN=nobody-here", user: u1 }] });
    const err = await refuse.map(jane).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(MappingRefused);
    expect(err).toMatchObject({
      status: 403,
      code: "NO_MAPPING",
      message: expect.stringContaining(`identity ${jane.subject} matches no mapping rule`),
    });
    const dflt = await create({ rules: [], onNoMatch: { user: u2 } });
    expect(await dflt.map(jane)).toMatchObject({ account: u2, rule: "mapping.onNoMatch" });
  });

  it("pools: two identities two accounts, the same one back, exhaustion names the pool", async () => {
    const m = await create({ rules: [{ match: "*", pool: { name: "grid", accounts: pool } }] });
    const a = await m.map(jane);
    const b = await m.map(john);
    expect(a.account).not.toBe(b.account);
    expect(pool).toContain(a.account);
    expect(pool).toContain(b.account);
    expect((await m.map(jane)).account).toBe(a.account);
    expect(a.rule).toBe("mapping.rules[0] pool grid");
    const err = await m.map(tok("third")).catch((e: unknown) => e);
    expect(err).toMatchObject({ status: 503, code: "POOL_EXHAUSTED", message: expect.stringContaining("pool grid") });
  });

  it("pools from a prefix and a range", async () => {
    // The two pool accounts are <prefix>p1, <prefix>p2.
    const m = await create({ rules: [{ match: "*", pool: { prefix: `${acc.prefix}p`, from: 1, to: 2 } }] });
    expect(pool).toContain((await m.map(jane)).account);
  });

  it("grid-mapfile: first account of the line, falls through when the DN is absent, follows changes", async () => {
    const gm = join(dir, "grid-mapfile");
    writeFileSync(gm, `# test\n"${jane.subject}" ${u1},${u2}\n`);
    const m = await create({
      gridmapCheckMs: 0,
      rules: [
        { match: "*", gridmap: gm },
        { match: "*", user: u3 },
      ],
    });
    expect(await m.map(jane)).toMatchObject({ account: u1, rule: `mapping.rules[0] gridmap ${gm}` });
    expect(await m.map(john)).toMatchObject({ account: u3, rule: "mapping.rules[1]" });
    writeFileSync(gm, `"${jane.subject}" ${u2}\n"${john.subject}" ${u1}\n"/CN=evil" root\n"/CN=ghost" ${acc.prefix}ghost\n`);
    expect((await m.map(jane)).account).toBe(u2);
    expect((await m.map(john)).account).toBe(u1);
    // A reloaded file cannot smuggle in a forbidden account: refused, naming it; no fall-through.
    const evil = await m.map({ ...john, subject: "/CN=evil" }).catch((e: unknown) => e);
    expect(evil).toMatchObject({
      status: 403,
      code: "BAD_MAPPING_TARGET",
      message: expect.stringContaining("account root is root (uid 0)"),
    });
    const ghost = await m.map({ ...john, subject: "/CN=ghost" }).catch((e: unknown) => e);
    expect(ghost).toMatchObject({ status: 403, message: expect.stringContaining(`account ${acc.prefix}ghost does not exist`) });
  });
});
