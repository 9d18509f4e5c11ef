import { randomUUID } from "node:crypto";
import { chmod, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { pino } from "pino";
import { inject } from "vitest";
import { compileConfig, type CompiledConfig, type ConfigInput } from "@ce/config";
import { emptyDescription, type InternalState, type JobDescription, type LocalUser, type OutputFile } from "@ce/model";
import { lookupAccounts } from "@ce/mapping";
import { AdvanceSet, DelegationStore, JobStore, Locks, SecretBox, recordRequests, type JobRecord, type Lease } from "@ce/store";
import { ControlDir, completeUpload, createJobs, type JobFilesInput } from "@ce/controldir";
import { startJem, type Jem, type JemOptions } from "../src/daemon.js";
import { waitFor as poll } from "@ce/testing";

export const OWNER = "/DC=org/DC=test/CN=Test User";

export interface TestEnv {
  config: CompiledConfig;
  redis: Redis;
  jobs: JobStore;
  control: ControlDir;
  delegations: DelegationStore;
  /** The JEM's work list: `ring` is what the gateway's commit and upload completion do. */
  advance: AdvanceSet;
  stateDir: string;
  close(): Promise<void>;
}

/** A private CE (own state dir, own Redis prefix) on the suite's real redis-server. */
export async function testEnv(overrides: ConfigInput = {}): Promise<TestEnv> {
  const stateDir = await mkdtemp(join(tmpdir(), "jem-test-"));
  const prefix = `{t${randomUUID().slice(0, 8)}}`;
  const base: ConfigInput = {
    paths: { stateDir },
    redis: { url: inject("redisUrl"), prefix },
    lrms: { backend: "fork", pollIntervalMs: 300 },
    jem: { concurrency: 20, scanIntervalMs: 500, expiryIntervalMs: 300 },
    // Test storage servers listen on loopback, which staging refuses unless a site opens it.
    staging: { maxRetries: 2, retryBaseMs: 50, timeoutMs: 10_000, allowNetworks: ["127.0.0.0/8", "::1/128"] },
    delegations: { encryptionKey: SecretBox.generateKey() },
    logging: { level: "silent" },
  };
  const config = compileConfig(merge(base, overrides) as ConfigInput, stateDir);
  const redis = new Redis(config.redis.url, { maxRetriesPerRequest: null });
  const control = new ControlDir(config.paths.controlDir, config.paths.sessionRoot);
  await control.ensureRoots();
  const env: TestEnv = {
    config,
    redis,
    jobs: new JobStore(redis, prefix),
    control,
    delegations: new DelegationStore(redis, prefix, new SecretBox(config.delegations.encryptionKey!)),
    advance: new AdvanceSet(redis, prefix),
    stateDir,
    async close() {
      const keys = await redis.keys(`${prefix}*`);
      if (keys.length) await redis.del(...keys);
      await redis.quit();
      await rm(stateDir, { recursive: true, force: true });
    },
  };
  return env;
}

function merge(a: Record<string, unknown>, b: Record<string, unknown>): Record<string, unknown> {
  const out = { ...a };
  for (const [k, v] of Object.entries(b)) {
    const p = out[k];
    out[k] =
      v && typeof v === "object" && !Array.isArray(v) && p && typeof p === "object"
        ? merge(p as Record<string, unknown>, v as Record<string, unknown>)
        : v;
  }
  return out;
}

/** Starts a JEM in this process with test-friendly timings. */
export function testJem(env: TestEnv, opts: JemOptions = {}): Promise<Jem> {
  return startJem(env.config, {
    logger: pino({ level: process.env.JEM_TEST_LOG ?? "silent" }),
    jobLockMs: 3_000,
    stalledIntervalMs: 3_000,
    stagingLockMs: 6_000,
    recoveryIntervalMs: 2_000,
    ...opts,
  });
}

export function output(name: string, extra: Partial<OutputFile> = {}): OutputFile {
  return { name, options: {}, useIfSuccess: true, useIfFailure: false, useIfCancel: false, ...extra };
}

/** A shell job: `sh -c <script>` in the session dir. */
export function shellJob(script: string, extra: Partial<JobDescription> = {}): Partial<JobDescription> {
  return { executable: "/bin/sh", arguments: ["-c", script], ...extra };
}

/** The gateway-side file inputs of a test job (the fields only the gateway knows get test values). */
export function testJobFiles(rec: JobRecord, d: JobDescription): JobFilesInput {
  return {
    id: rec.id,
    description: d,
    source: JSON.stringify(d),
    owner: rec.owner,
    queue: rec.queue,
    backend: rec.backend,
    endpointUrl: "https://ce.test",
    hostname: "ce.test",
    version: "1.1",
    lifetime: rec.lifetime,
    rerun: rec.rerun,
    requestId: rec.requestId ?? "req-test",
    now: new Date(rec.created),
    localUser: rec.localUser,
    fqans: rec.fqans,
  };
}

const held = new Map<string, Lease>();

/**
 * Creates a job through the gateway's own sequence (@ce/controldir `createJobs`: creating mark, control
 * files with `wx`, the Redis record due for the JEM in the same commit).
 * `notify: false`: the job's lease is held until `letJemSee(env, id)`, so a running JEM cannot
 * touch it meanwhile (tests that change the job by hand first).
 */
export async function submitTestJob(
  env: TestEnv,
  partial: Partial<JobDescription> = {},
  record: Partial<JobRecord> = {},
  opts: { notify?: boolean } = {},
): Promise<string> {
  const d: JobDescription = { ...emptyDescription("emies:adl"), executable: "/bin/true", ...partial };
  const id = randomUUID();
  const { config } = env;
  const rec = JobStore.newRecord({
    id,
    owner: OWNER,
    queue: "main",
    backend: config.lrms.backend,
    language: d.language,
    jobName: d.jobName,
    rerun: d.rerun ?? 0,
    lifetime: d.lifetimeSeconds ?? config.jobs.sessionLifetimeSeconds,
    delegations: [],
    requestId: `req-${id.slice(0, 8)}`,
    summary: { stdout: d.stdout, stderr: d.stderr },
    ...record,
  });
  if (opts.notify === false) {
    const lease = await new Locks(env.redis, config.redis.prefix).tryAcquire(`job:${rec.id}`, 60_000);
    if (!lease) throw new Error("job lease not taken");
    held.set(rec.id, lease);
  }
  const problems: string[] = [];
  const { outcomes } = await createJobs(env, [{ record: rec, files: testJobFiles(rec, d) }], {
    maxTotal: config.jobs.maxTotal,
    warn: (what, err) => problems.push(`${what}: ${String(err)}`),
  });
  if (outcomes[0] !== "created" || problems.length) throw new Error(`job not created cleanly (${outcomes[0]}): ${problems.join("; ")}`);
  return rec.id;
}

/** Ends the hold of `submitTestJob(…, { notify: false })` and rings the job, as an event would. */
export async function letJemSee(env: TestEnv, id: string): Promise<void> {
  await held.get(id)?.release();
  held.delete(id);
  await env.advance.ring([id]);
}

/** A client upload completing, through the gateway's own rule (@ce/controldir `completeUpload`). */
export async function clientUpload(env: TestEnv, id: string, name: string, content: string | Buffer): Promise<void> {
  await writeFile(join(env.control.sessionDir(id), name), content);
  const job = await env.jobs.get(id);
  if (!job) throw new Error(`no job ${id}`);
  await completeUpload(env.control, job, `/${name}`, () => env.advance.ring([id]));
}

export async function sendCommand(env: TestEnv, action: "kill" | "clean" | "restart", jobId: string): Promise<void> {
  await recordRequests(env.jobs, [{ action, jobId }]); // as the gateway: on the record, rung on the work list
}

/** @ce/testing's `waitFor` with this suite's defaults; a falsy value (0, "") also means "not yet". */
export async function waitFor<T>(what: string, fn: () => Promise<T | undefined | false>, timeoutMs = 20_000, everyMs = 50): Promise<T> {
  return poll(what, async () => (await fn()) || undefined, timeoutMs, { everyMs });
}

/** Waits for a REST state (or the record to disappear with "GONE"). */
export async function waitForRest(env: TestEnv, id: string, rest: string | string[], timeoutMs = 20_000): Promise<JobRecord | undefined> {
  const want = Array.isArray(rest) ? rest : [rest];
  const r = await waitFor(
    `job ${id.slice(0, 8)} in ${want.join("/")}`,
    async () => {
      const r = await env.jobs.get(id);
      if (!r) return want.includes("GONE") ? ({} as JobRecord) : false;
      return want.includes(r.rest) ? r : false;
    },
    timeoutMs,
  );
  // Control files follow Redis (status after the CAS); for final states wait for them too.
  if (r.state === "FINISHED" || r.state === "DELETED") {
    await waitFor(`status of ${id.slice(0, 8)}`, async () => (await env.control.read(id, "status"))?.trim() === r.state, 5_000);
  }
  return r.id ? r : undefined;
}

/** Internal state changes recorded in `errors` ("Job state change A -> B"). */
export async function transitionsOf(env: TestEnv, id: string): Promise<Array<{ from: string; to: string }>> {
  const text = (await env.control.read(id, "errors")) ?? "";
  return [...text.matchAll(/Job state change (\S+) -> (\S+)/g)].map((m) => ({ from: m[1]!, to: m[2]! }));
}

export type { InternalState };

/**
 * A real account (TestAccounts, root only) all jobs of a test CE are mapped to, as the JEM needs
 * for anything that runs as a job (batch scripts, and transfer tools: xrdcp/xrdfs never run as
 * root). Pass `mapping` to testEnv, make the state dir traversable with `mappedStateDir`, and give
 * `localUser` to submitTestJob.
 */
export async function mappedAccount(
  accounts: { add(suffix: string): Promise<string> },
  suffix: string,
): Promise<{ localUser: LocalUser; mapping: NonNullable<ConfigInput["mapping"]> }> {
  const name = await accounts.add(suffix);
  const a = (await lookupAccounts([name])).get(name);
  if (!a) throw new Error(`test account ${name} not found after useradd`);
  return {
    localUser: { account: name, uid: a.uid, gid: a.gid, groups: [a.gid], rule: "mapping.rules[0]" },
    mapping: { rules: [{ name: "test", match: ["*"], user: name }] },
  };
}

/** Mapped accounts reach their session dirs by path: the state dir must be traversable (0711). */
export async function mappedStateDir(env: TestEnv): Promise<void> {
  await chmod(env.stateDir, 0o711);
}
