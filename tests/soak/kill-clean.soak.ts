import { join } from "node:path";
import { afterEach, describe, expect, inject, it } from "vitest";
import { items, RestClient, TERMINAL, submit, xrslBatch, type JobItem } from "../../bench/lib/rest.js";
import { startStack, type Stack } from "@ce/testing/stack";

// `pnpm soak` (issue 29): rounds of the load that once killed the JEM with a native assertion in
// its file thread (a descriptor closed twice elsewhere in the process): submit jobs that wait for
// a client upload, 8 clients looping bulk status, bulk kill, bulk clean. Counted: JEM exits and
// every EBADF, native assertion or stolen-descriptor line in the CE's log (target: none), and every
// job must end KILLED and then be gone. The second variant SIGKILLs the JEM once per round, in the
// middle of the kill and clean work, and starts it again.
// SOAK_KC_ROUNDS / SOAK_KC_JOBS / SOAK_KC_LOOP_S change the size.

const ROUNDS = Number(process.env.SOAK_KC_ROUNDS ?? 20);
const JOBS = Number(process.env.SOAK_KC_JOBS ?? 500);
const LOOP_S = Number(process.env.SOAK_KC_LOOP_S ?? 5);
const CLIENTS = 8;
const PER_REQUEST = 50;
const SETTLE_MS = 180_000;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const waitingJob = (round: number) => (i: number) => `&(executable="/bin/true")(jobname="kc${round}-${i}")(inputfiles=("in.dat" ""))`;

/** Lines of the CE log that show a descriptor closed by someone else or the crash it causes. */
const BAD = /EBADF|uv_fs_close|Assertion failed|descriptor closed by someone else/;

interface Round {
  jobs: number;
  statusCalls: number;
  killS: number;
  cleanS: number;
  badLines: string[];
  jemExits: number;
  stuck: number;
}

let stack: Stack | undefined;
afterEach(async () => {
  await stack?.stop();
  stack = undefined;
});

async function until(what: string, ms: number, done: () => Promise<boolean>): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await done()) return true;
    await sleep(500);
  }
  console.log(`  not done in ${ms / 1000} s: ${what}`);
  return false;
}

/** Bulk status: id → state, or "gone" for a job the CE no longer knows (404 item). */
async function states(c: RestClient, ids: string[]): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (let i = 0; i < ids.length; i += 500) {
    const r = await c.json<{ job?: JobItem | JobItem[] }>("POST", "jobs?action=status", {
      job: ids.slice(i, i + 500).map((id) => ({ id })),
    });
    for (const j of items(r.job)) if (j.id) out.set(j.id, j["status-code"] === "404" ? "gone" : (j.state ?? `status-${j["status-code"]}`));
  }
  return out;
}

async function bulk(c: RestClient, action: "kill" | "clean", ids: string[]): Promise<void> {
  for (let i = 0; i < ids.length; i += 500) {
    const r = await c.call("POST", `jobs?action=${action}`, JSON.stringify({ job: ids.slice(i, i + 500).map((id) => ({ id })) }), {
      "content-type": "application/json",
    });
    if (r.status !== 201 && r.status !== 200) throw new Error(`${action}: ${r.status} ${r.body.toString("utf8").slice(0, 300)}`);
  }
}

async function round(s: Stack, c: RestClient, loopers: RestClient[], n: number, sigkill: boolean, seenLog: { at: number }): Promise<Round> {
  let jemExits = 0;
  // A JEM that died on its own is counted and started again, so the soak goes on and counts.
  const watchJem = async () => {
    if (!s.jemAlive()) {
      jemExits++;
      await s.restartJem({ kill: false });
    }
  };
  const ids: string[] = [];
  const body = xrslBatch(PER_REQUEST, waitingJob(n));
  for (let k = 0; k < Math.ceil(JOBS / PER_REQUEST); k += 2) {
    const got = await Promise.all([
      submit(c, body),
      k + 1 < Math.ceil(JOBS / PER_REQUEST) ? submit(c, body) : Promise.resolve({ ids: [] }),
    ]);
    for (const g of got) ids.push(...g.ids);
  }
  await watchJem();

  // 8 clients loop bulk status over every job of the round.
  let statusCalls = 0;
  const end = Date.now() + LOOP_S * 1000;
  await Promise.all(
    loopers.map(async (l) => {
      while (Date.now() < end) {
        await states(l, ids);
        statusCalls++;
      }
    }),
  );
  await watchJem();

  const t0 = Date.now();
  await bulk(c, "kill", ids);
  // The JEM dies while it carries out the kills (sessions removed, states moved), then comes back.
  const killer = sigkill ? sleep(200 + Math.random() * 1500).then(() => s.restartJem()) : Promise.resolve();
  const allKilled = await until(`round ${n}: all ${ids.length} jobs KILLED`, SETTLE_MS, async () => {
    await watchJem();
    return [...(await states(c, ids)).values()].every((st) => TERMINAL.has(st));
  });
  await killer;
  const killS = (Date.now() - t0) / 1000;
  const t1 = Date.now();
  await bulk(c, "clean", ids);
  let left = ids;
  await until(`round ${n}: all jobs cleaned`, SETTLE_MS, async () => {
    await watchJem();
    const st = await states(c, left);
    left = left.filter((id) => st.get(id) !== "gone");
    return left.length === 0;
  });
  const cleanS = (Date.now() - t1) / 1000;

  const log = s.logs();
  const badLines = log
    .slice(seenLog.at)
    .split("\n")
    .filter((l) => BAD.test(l));
  seenLog.at = log.length;
  return { jobs: ids.length, statusCalls, killS, cleanS, badLines, jemExits, stuck: allKilled ? left.length : ids.length };
}

async function soak(sigkill: boolean): Promise<void> {
  stack = await startStack({ redisUrl: inject("redisUrl"), redisUsers: inject("redisUsers"), backend: "fork" });
  const s = stack;
  const client = (sockets: number) =>
    new RestClient({ base: s.url, credFile: join(s.pki, "user", "proxy.pem"), caFile: join(s.pki, "ca", "ca.pem"), sockets });
  const c = client(2);
  const loopers = Array.from({ length: CLIENTS }, () => client(1));
  const seenLog = { at: 0 };
  const totals = { jobs: 0, badLines: [] as string[], jemExits: 0, stuck: 0 };
  try {
    for (let n = 1; n <= ROUNDS; n++) {
      const r = await round(s, c, loopers, n, sigkill, seenLog);
      totals.jobs += r.jobs;
      totals.badLines.push(...r.badLines);
      totals.jemExits += r.jemExits;
      totals.stuck += r.stuck;
      console.log(
        `kill/clean${sigkill ? " +SIGKILL" : ""} round ${n}/${ROUNDS}: ${r.jobs} jobs, ${r.statusCalls} bulk status calls, ` +
          `killed in ${r.killS.toFixed(1)} s, cleaned in ${r.cleanS.toFixed(1)} s, EBADF/assertion lines ${r.badLines.length}, JEM exits ${r.jemExits}, stuck ${r.stuck}`,
      );
      for (const l of r.badLines.slice(0, 5)) console.log(`  ${l.slice(0, 400)}`);
    }
  } finally {
    c.close();
    for (const l of loopers) l.close();
  }
  console.log(
    `kill/clean${sigkill ? " +SIGKILL" : ""}: ${ROUNDS} rounds, ${totals.jobs} jobs, ${totals.badLines.length} EBADF/assertion lines, ${totals.jemExits} JEM exits, ${totals.stuck} stuck`,
  );
  expect(totals.badLines).toEqual([]);
  expect(totals.jemExits).toBe(0);
  expect(s.exited()).toEqual([]);
  expect(totals.stuck).toBe(0);
}

describe("soak: bulk kill and clean of jobs waiting for uploads", () => {
  it(`${ROUNDS} rounds of ${JOBS} jobs`, () => soak(false), 3_600_000);
  it(`${ROUNDS} rounds of ${JOBS} jobs, the JEM SIGKILLed once per round`, () => soak(true), 3_600_000);
});
