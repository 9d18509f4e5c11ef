import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { lookupAccounts, PoolLeases } from "@ce/mapping";
import { TestAccounts } from "@ce/mapping/testing";
import { JobStore } from "@ce/store";
import { startTestGateway, XRSL, type TestGateway } from "./harness.js";

// Identity → local account at submission: decided once, stored on the record, in the `local`
// control file and in the job's GLUE2 activity (LocalOwner). Real accounts need root (CI is).
const acc = new TestAccounts();
let pool: string[] = [];
let t: TestGateway;
let refusing: TestGateway;

beforeAll(async () => {
  if (!TestAccounts.available()) return;
  pool = [await acc.add("a"), await acc.add("b")];
  t = await startTestGateway(inject("redisUrl"), {
    mapping: { rules: [{ name: "grid", match: "ca:/DC=org/DC=cetest/*", pool: { name: "grid", accounts: pool } }] },
  });
  refusing = await startTestGateway(inject("redisUrl"), {
    mapping: { rules: [{ match: "dn:*Bob*", user: pool[0]! }], onNoMatch: "refuse" },
  });
});
afterAll(async () => {
  await t?.close();
  await refusing?.close();
  await acc.remove();
});

const submit = (g: TestGateway, as: "alice" | "bob") =>
  g.request("POST", `${g.rest}/1.1/jobs?action=new`, {
    as,
    body: XRSL(),
    accept: "application/json",
    headers: { "content-type": "application/rsl" },
  });

describe.runIf(TestAccounts.available())("identity mapping at submission", () => {
  it("maps each identity to its own pool account, stores it on the record, the local file and LocalOwner", async () => {
    const ra = await submit(t, "alice");
    const rb = await submit(t, "bob");
    expect(ra.status).toBe(201);
    expect(rb.status).toBe(201);
    const [ida, idb] = [ra.json().job[0].id as string, rb.json().job[0].id as string];
    const store = new JobStore(t.gw.services.redis, t.prefix);
    const [a, b] = [(await store.get(ida))!, (await store.get(idb))!];
    expect(pool).toContain(a.localUser?.account);
    expect(pool).toContain(b.localUser?.account);
    expect(a.localUser?.account).not.toBe(b.localUser?.account);
    const real = (await lookupAccounts(pool)).get(a.localUser!.account)!;
    expect(a.localUser).toEqual({
      account: real.account,
      uid: real.uid,
      gid: real.gid,
      groups: real.groups,
      rule: 'mapping.rules[0] "grid" pool grid',
      pool: "grid",
    });

    // Same identity, same account; and the lease is recorded in Redis for that identity.
    const again = await submit(t, "alice");
    expect((await store.get(again.json().job[0].id))?.localUser?.account).toBe(a.localUser?.account);
    expect(await new PoolLeases(t.gw.services.redis, t.prefix).holder(a.localUser!.account)).toBe(t.pki.dn.alice);

    const local = readFileSync(t.gw.services.control.file(ida, "local"), "utf8");
    expect(local).toContain(`localuser=${real.account}\n`);
    expect(local).toContain(`localuid=${real.uid}\n`);
    expect(local).toContain(`localgid=${real.gid}\n`);

    const info = await t.request("POST", `${t.rest}/1.1/jobs?action=info`, {
      body: `<jobs><job><id>${ida}</id></job></jobs>`,
      accept: "text/xml",
      headers: { "content-type": "application/xml" },
    });
    expect(info.status).toBe(201);
    expect(info.text).toContain(`<LocalOwner>${real.account}</LocalOwner>`);
    // The owner's diagnose view of the same control file.
    const diag = await t.request("GET", `${t.rest}/1.1/jobs/${ida}/diagnose/local`);
    expect(diag.status).toBe(200);
    expect(diag.text).toContain(`localuser=${real.account}`);
  });

  it("the mapping never changes for a job", async () => {
    const r = await submit(t, "bob");
    const store = new JobStore(t.gw.services.redis, t.prefix);
    const job = (await store.get(r.json().job[0].id))!;
    await expect(store.update(job, { localUser: { ...job.localUser!, account: "root", uid: 0 } } as never)).rejects.toThrow(
      /localUser never changes/,
    );
    expect((await store.get(job.id))?.localUser).toEqual(job.localUser);
  });

  it("an exhausted pool: 503 naming the pool, no job created", async () => {
    const solo = await startTestGateway(inject("redisUrl"), {
      mapping: { rules: [{ match: "*", pool: { name: "solo", accounts: [pool[1]!] } }] },
    });
    try {
      expect((await submit(solo, "alice")).status).toBe(201);
      const r = await submit(solo, "bob");
      expect(r.status).toBe(503);
      expect(r.text).toContain("every account of pool solo is leased to another identity");
      expect(await new JobStore(solo.gw.services.redis, solo.prefix).total()).toBe(1);
    } finally {
      await solo.close();
    }
  });

  it("no matching rule with onNoMatch refuse: 403 naming the reason, no job created", async () => {
    const r = await submit(refusing, "alice");
    expect(r.status).toBe(403);
    expect(r.text).toContain("matches no mapping rule");
    expect(r.text).toContain("Alice Tester");
    expect(await new JobStore(refusing.gw.services.redis, refusing.prefix).total()).toBe(0);
    expect((await submit(refusing, "bob")).status).toBe(201);
  });

  it("a mapping to a forbidden account stops the boot, naming the rule", async () => {
    await expect(
      startTestGateway(inject("redisUrl"), {
        mapping: {
          rules: [
            { match: "*", user: pool[0]! },
            { name: "admins", match: "dn:*", user: "root" },
          ],
        },
      }),
    ).rejects.toThrow('mapping.rules[1] "admins": account root is root (uid 0)');
  });
});
