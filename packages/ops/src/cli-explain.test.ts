import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { PoolLeases } from "@ce/store";
import { TestAccounts } from "@ce/mapping/testing";

// `ceadm explain` (issue 36): what the CE would do with a description from an identity, through
// the submission's own decisions (access policy, queue rule, mapping without taking a lease, Slurm
// placement, limits). Exit 0 accept, 1 refuse naming the rule; nothing is submitted.

const run = promisify(execFile);
const root = fileURLToPath(new URL("../../..", import.meta.url));
const prefix = `{ops-x-${randomBytes(4).toString("hex")}}`;
const dir = mkdtempSync(join(tmpdir(), "ceadm-explain-"));
const ROOT = TestAccounts.available();
const accounts = new TestAccounts();
let pooled = "";
let redis: Redis;
const DN = "/DC=org/DC=test/CN=Jane Doe";

async function ceadm(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const env = { ...process.env, CE__REDIS__URL: inject("redisUrl"), CE__REDIS__PREFIX: prefix, CE_CONFIG: join(dir, "ce.yaml") };
  try {
    const { stdout, stderr } = await run(process.execPath, ["--import", "tsx", "packages/ops/src/cli.ts", ...args], { cwd: root, env });
    return { code: 0, stdout, stderr };
  } catch (e) {
    const err = e as { code: number; stdout: string; stderr: string };
    return { code: err.code, stdout: err.stdout, stderr: err.stderr };
  }
}

beforeAll(async () => {
  redis = new Redis(inject("redisUrl"));
  if (ROOT) pooled = await accounts.add("xp");
  const mapping = ROOT ? `mapping:\n  rules:\n    - match: "vo:atlas"\n      pool: { name: atlaspool, accounts: [${pooled}] }\n` : "";
  writeFileSync(
    join(dir, "ce.yaml"),
    `paths:\n  stateDir: ${dir}\nauth:\n  deny: ["dn:/DC=org/DC=test/CN=Banned*"]\njobs:\n  defaultQueue: main\n  queues:\n    - { name: main }\n    - { name: atlasq, allow: ["vo:atlas"], partition: debug }\nlrms:\n  backend: slurm\n  slurm:\n    placement:\n      - { match: ["vo:atlas"], account: atlasacct, qos: grid }\n${mapping}`,
  );
  writeFileSync(join(dir, "job.xrsl"), '&(executable="/bin/true")(jobname="explained")');
  writeFileSync(join(dir, "atlas.xrsl"), '&(executable="/bin/true")(queue="atlasq")');
  writeFileSync(
    join(dir, "staging.xrsl"),
    '&(executable="/bin/true")(inputfiles=("a" "http://127.0.0.1:8080/a")("b" "https://192.0.2.10/b"))(outputfiles=("c" "davs://10.1.2.3/c"))',
  );
  writeFileSync(join(dir, "nowhere.xrsl"), '&(executable="/bin/true")(queue="nowhere")');
}, 60_000);
afterAll(async () => {
  const keys = await redis.keys(`${prefix}*`);
  if (keys.length) await redis.del(...keys);
  await redis.quit();
  await accounts.remove();
  rmSync(dir, { recursive: true, force: true });
});

describe("ceadm explain", () => {
  it("names the queue and the placement, exit 0; --json gives the same as data", async () => {
    const r = await ceadm("explain", "--dn", DN, "--fqan", "/atlas/Role=production", join(dir, "atlas.xrsl"));
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/queue\s+queue atlasq\s+\[jobs\.queues\[atlasq\]\.allow vo:atlas\]/);
    expect(r.stdout).toMatch(/Slurm partition debug, account atlasacct, QOS grid\s+\[lrms\.slurm\.placement\[0\]\]/);
    expect(r.stdout).toContain("the CE would accept this submission");
    const j = JSON.parse((await ceadm("--json", "explain", "--dn", DN, "--fqan", "/atlas", join(dir, "atlas.xrsl"))).stdout);
    expect(j.accepted).toBe(true);
    expect(j.jobs[0].steps.find((s: { step: string }) => s.step === "queue")).toMatchObject({ ok: true, detail: "queue atlasq" });
  }, 60_000);

  it.skipIf(!ROOT)(
    "names the mapped pool account without taking a lease",
    async () => {
      const r = await ceadm("explain", "--dn", DN, "--fqan", "/atlas", join(dir, "job.xrsl"));
      expect(r.code).toBe(0);
      expect(r.stdout).toContain(`account ${pooled} (uid`);
      expect(r.stdout).toContain("leased from pool atlaspool (not taken: dry run)");
      expect(await new PoolLeases(redis, prefix).holder(pooled)).toBeUndefined();
    },
    60_000,
  );

  it("refuses an unknown queue, a queue rule, a deny rule and an unmapped identity, exit 1 naming the rule", async () => {
    const unknown = await ceadm("explain", "--dn", DN, "--fqan", "/atlas", join(dir, "nowhere.xrsl"));
    expect(unknown.code).toBe(1);
    expect(unknown.stdout).toMatch(/REFUSED queue\s+Requested queue nowhere does not exist on this CE \(400\)\s+\[jobs\.queues\]/);
    expect(unknown.stdout).toContain("the CE would refuse this submission");
    // The queue override of the command line, as the 1.1 `queue` parameter.
    const notAllowed = await ceadm("explain", "--dn", DN, "--queue", "atlasq", join(dir, "job.xrsl"));
    expect(notAllowed.code).toBe(1);
    expect(notAllowed.stdout).toMatch(/Requested queue atlasq is not allowed for this user \(403\)\s+\[jobs\.queues\[atlasq\]\.allow\]/);
    const banned = await ceadm("explain", "--dn", "/DC=org/DC=test/CN=Banned User", join(dir, "job.xrsl"));
    expect(banned.code).toBe(1);
    expect(banned.stdout).toMatch(/REFUSED access .*matches deny rule dn:\/DC=org\/DC=test\/CN=Banned\*/);
    if (ROOT) {
      const unmapped = await ceadm("explain", "--dn", DN, join(dir, "job.xrsl"));
      expect(unmapped.code).toBe(1);
      expect(unmapped.stdout).toMatch(/REFUSED mapping\s+identity .* matches no mapping rule.*\[NO_MAPPING\]/);
    }
  }, 120_000);

  it("names each staging URL the destination policy would refuse, with the stager's reason", async () => {
    const r = await ceadm("explain", "--dn", DN, "--fqan", "/atlas", join(dir, "staging.xrsl"));
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/REFUSED staging\s+input a: 127\.0\.0\.1 is loopback \(staging\.allowNetworks does not include it\)/);
    expect(r.stdout).toMatch(/ok\s+staging\s+input b: https:\/\/192\.0\.2\.10 allowed/);
    expect(r.stdout).toMatch(/REFUSED staging\s+output c: 10\.1\.2\.3 is private/);
  }, 60_000);

  it("a token's issuer, subject and groups are the identity; a missing file or identity is a usage error", async () => {
    const b64 = (o: object) => Buffer.from(JSON.stringify(o)).toString("base64url");
    writeFileSync(
      join(dir, "token"),
      `${b64({ alg: "RS256" })}.${b64({ iss: "https://iss.test", sub: "u/1", "wlcg.groups": ["/atlas"] })}.sig`,
    );
    const j = JSON.parse((await ceadm("--json", "explain", "--token", join(dir, "token"), join(dir, "atlas.xrsl"))).stdout);
    expect(j.identity).toMatchObject({ subject: "https://iss.test/u%2F1", kind: "token", vos: ["atlas"] });
    expect(j.jobs[0].steps.find((s: { step: string }) => s.step === "queue").ok).toBe(true);
    const usage = await ceadm("explain", join(dir, "job.xrsl"));
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain("--dn DN or --token FILE is required");
  }, 60_000);
});
