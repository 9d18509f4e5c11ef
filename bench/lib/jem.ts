/**
 * What the CE benchmarks that drive a JEM child share: a fresh state directory and Redis prefix,
 * the fork back end with only loopback opened (`staging.allowNetworks`, which a real site does not
 * need) and the test CA trusted, the stores jobs are created through (the gateway's own sequence,
 * @ce/controldir createJobs), and the JEM child with the shipped lease, stall, staging-lock and
 * recovery timings (the child's defaults are the crash tests' few seconds). `cache`: one cache
 * directory in the state directory, else none.
 */
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { join } from "node:path";
import type { ChildProcess } from "node:child_process";
import { compileConfig, type CompiledConfig } from "@ce/config";
import { ControlDir, createJobs, type JobFilesInput, type NewJob } from "@ce/controldir";
import type { JobDescription } from "../../packages/model/src/index.js";
import { DelegationStore, JobStore, SecretBox, connectRedis, type JobRecord } from "@ce/store";
import { spawnJem } from "../../apps/jem/test/support/child.js";

export interface BenchJemState {
  config: CompiledConfig;
  prefix: string;
  stateDir: string;
  conn: ReturnType<typeof connectRedis>;
  jobs: JobStore;
  control: ControlDir;
  delegations: DelegationStore;
}

export async function benchJemState(o: { redisUrl: string; caFile: string; name: string; cache?: boolean }): Promise<BenchJemState> {
  const stateDir = mkdtempSync(`/tmp/ce-bench-${o.name}-`);
  const prefix = `{${o.name.slice(0, 1)}${randomUUID().slice(0, 6)}}`;
  const config = compileConfig(
    {
      paths: { stateDir },
      redis: { url: o.redisUrl, prefix },
      lrms: { backend: "fork" },
      staging: { caFile: o.caFile, allowNetworks: ["127.0.0.0/8"], cache: { dirs: o.cache ? [{ path: join(stateDir, "cache") }] : [] } },
      delegations: { encryptionKey: SecretBox.generateKey() },
      logging: { level: "silent" },
    },
    stateDir,
  );
  const conn = connectRedis(config.redis, "ceadm");
  const control = new ControlDir(config.paths.controlDir, config.paths.sessionRoot);
  await control.ensureRoots();
  return {
    config,
    prefix,
    stateDir,
    conn,
    jobs: new JobStore(conn.redis, prefix),
    control,
    delegations: new DelegationStore(conn.redis, prefix, new SecretBox(config.delegations.encryptionKey!)),
  };
}

/** The JEM child with the shipped timings. */
export function spawnShippedJem(config: CompiledConfig): Promise<ChildProcess> {
  return spawnJem(config, {
    JEM_CHILD_LOCK_MS: "30000",
    JEM_CHILD_STALLED_MS: "30000",
    JEM_CHILD_STAGING_LOCK_MS: "60000",
    JEM_CHILD_RECOVERY_MS: "30000",
  });
}

/** The control files of one bench job, as a gateway writes them. */
export function benchJobFiles(r: JobRecord, d: JobDescription, requestId: string): JobFilesInput {
  return {
    id: r.id,
    description: d,
    source: JSON.stringify(d),
    owner: r.owner,
    queue: r.queue,
    backend: r.backend,
    endpointUrl: "https://ce.bench",
    hostname: "ce.bench",
    version: "1.1",
    lifetime: r.lifetime,
    rerun: r.rerun,
    requestId,
    now: new Date(r.created),
  };
}

/** Creates every job in batches of 500 (one request's worth), failing if any is not created. */
export async function createAllJobs(
  s: Pick<BenchJemState, "jobs" | "control" | "config">,
  entries: readonly NewJob[],
  log: (line: string) => void,
): Promise<void> {
  for (let off = 0; off < entries.length; off += 500) {
    const batch = entries.slice(off, off + 500);
    const { committed } = await createJobs({ jobs: s.jobs, control: s.control }, batch, {
      maxTotal: s.config.jobs.maxTotal,
      warn: (what, err) => log(`  ${what}: ${String(err)}`),
    });
    if (committed.length !== batch.length) throw new Error(`only ${committed.length} of ${batch.length} jobs created`);
  }
}

/** Removes the run's Redis keys and state directory. */
export async function closeBenchJemState(s: BenchJemState): Promise<void> {
  const keys = await s.conn.redis.keys(`${s.prefix}*`);
  if (keys.length) await s.conn.redis.del(...keys);
  await s.conn.close();
  rmSync(s.stateDir, { recursive: true, force: true });
}
