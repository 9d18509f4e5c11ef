/**
 * Root deletes a job's files (clean, expiry, the lost-record sweep) inside a tree the job's account
 * can write: its batch dir `<session>.lrms` (2770, the account's). The job fills its `d` with
 * 20,000 files, waits until the deletion is inside `d`, renames `d` away and puts a symlink to a
 * victim directory in its place. A deletion by path then goes through the link and removes the
 * victim's files as root; the JEM's deletion holds directories by descriptor and never follows a
 * link, so the victim survives every round. The swap runs in a separate process (the job's side)
 * while a real JEM (fork back end) handles a `clean` request or the `lifetime` expiry.
 */
import { fork, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { createRequire } from "node:module";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Jem } from "../../apps/jem/src/daemon.js";
import { sendCommand, shellJob, submitTestJob, testEnv, testJem, waitFor, waitForRest, type TestEnv } from "../../apps/jem/test/helpers.js";

const VICTIM_FILES = Array.from({ length: 100 }, (_, i) => `v${String(i).padStart(3, "0")}`);
const PAD = 20_000;
const CLEAN_ROUNDS = 8;
const EXPIRY_ROUNDS = 3;
/** Seconds: long enough to fill and arm the batch dir after FINISHED. */
const LIFETIME = 15;

let env: TestEnv;
let jem: Jem;
let attacker: ChildProcess;
let victimRoot: string;

beforeAll(async () => {
  // Expiry comes from the job's own `lifetime` only (the session lifetime is long).
  env = await testEnv({ jobs: { sessionLifetimeSeconds: 3600, wipedRecordSeconds: 3600 } });
  jem = await testJem(env);
  victimRoot = await mkdtemp(join(tmpdir(), "deletion-race-victim-"));
  attacker = fork(createRequire(import.meta.url).resolve("@ce/testing/swap-attacker"), [], {
    execArgv: ["--import", "tsx"],
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
}, 30_000);
afterAll(async () => {
  attacker?.kill();
  await jem?.stop();
  await env?.close();
  await rm(victimRoot, { recursive: true, force: true });
});

/** The attacker's first message carrying `key`. */
function next<T>(key: string): Promise<T> {
  return new Promise((resolve) => {
    const on = (m: Record<string, unknown>) => {
      if (!(key in m)) return;
      attacker.off("message", on);
      resolve(m as T);
    };
    attacker.on("message", on);
  });
}

/**
 * A victim directory (what root must never delete) and a job whose batch dir's `d` is filled while it
 * runs and armed against the victim once it is FINISHED; undefined when the JEM removed the
 * job's files before the trap was set (a round without an attack).
 */
async function armedJob(
  round: number,
  lifetime?: number,
): Promise<{ id: string; victim: string; swapped: Promise<{ swapped: boolean }> } | undefined> {
  const victim = join(victimRoot, `r${round}`);
  await mkdir(victim);
  for (const n of VICTIM_FILES) await writeFile(join(victim, n), "precious");
  const id = await submitTestJob(env, shellJob("true"), lifetime === undefined ? {} : { lifetime });
  // The batch dir as it is with mapping on: the job's account owns it and everything in it.
  const d = join(env.control.batchDir(id), "d");
  const filled = next<{ filled: boolean }>("filled");
  attacker.send({ fill: d, names: VICTIM_FILES, pad: PAD });
  if (!(await filled).filled) return undefined;
  const rest = (await waitForRest(env, id, ["FINISHED", "FAILED", "WIPED"]))?.rest;
  if (rest === "WIPED") return undefined; // expired before the trap was set
  expect(rest).toBe("FINISHED");
  const armed = next("armed");
  const swapped = next<{ swapped: boolean }>("swapped");
  attacker.send({ arm: d, victim });
  await armed;
  return { id, victim, swapped };
}

async function victimIntact(victim: string): Promise<void> {
  expect((await readdir(victim)).sort()).toEqual(VICTIM_FILES);
}

describe("deletion race in the job's batch dir", () => {
  it(`clean: the victim survives ${CLEAN_ROUNDS} rounds, the job's files are gone`, async () => {
    let swaps = 0;
    for (let round = 0; round < CLEAN_ROUNDS; round++) {
      const job = await armedJob(round);
      if (!job) continue;
      await sendCommand(env, "clean", job.id);
      if ((await job.swapped).swapped) swaps++;
      await waitForRest(env, job.id, "GONE", 60_000);
      await victimIntact(job.victim);
      await waitFor("job dir removed", async () => !existsSync(env.control.jobDir(job.id)), 20_000);
      expect(existsSync(env.control.batchDir(job.id))).toBe(false);
    }
    // The attack must actually have run (the swap landed while the deletion was inside d).
    expect(swaps).toBeGreaterThan(0);
  }, 600_000);

  it(`lifetime expiry: the victim survives ${EXPIRY_ROUNDS} rounds`, async () => {
    let swaps = 0;
    for (let round = 0; round < EXPIRY_ROUNDS; round++) {
      const job = await armedJob(100 + round, LIFETIME);
      if (!job) continue;
      if ((await job.swapped).swapped) swaps++;
      await waitForRest(env, job.id, "WIPED", 60_000);
      // The wipe follows the WIPED transition in the same pass: wait for it, then look.
      await waitFor("batch dir removed", async () => !existsSync(env.control.batchDir(job.id)), 20_000).catch(() => undefined);
      await victimIntact(job.victim);
      expect(existsSync(env.control.batchDir(job.id))).toBe(false);
    }
    expect(swaps).toBeGreaterThan(0);
  }, 600_000);
});
