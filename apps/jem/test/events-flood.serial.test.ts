import type { ChildProcess } from "node:child_process";
import { execFileSync } from "node:child_process";
import {
  closeSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { shellJob, submitTestJob, testEnv, waitFor, waitForRest, type TestEnv } from "./helpers.js";
import { spawnJem, stopGracefully } from "./support/child.js";
import { quietPeriod } from "@ce/testing";

// A job's account can create anything in control/events (1733). A flood of names that are not
// doorbells must cost the JEM a bounded amount while it lasts and nothing once it is gone, and
// must not keep real doorbells from being answered.
const JUNK = 300_000;
const HZ = Number(execFileSync("getconf", ["CLK_TCK"]).toString().trim()) || 100;

let env: TestEnv;
let jem: ChildProcess;
// On tmpfs where there is one: creating 300,000 files on a slow disk takes minutes by itself.
const stateDir = mkdtempSync(join(existsSync("/dev/shm") ? "/dev/shm" : tmpdir(), "jem-flood-"));

/** CPU seconds (user + system) the process has used so far. */
function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(f[11]) + Number(f[12])) / HZ;
}
function rssMb(pid: number): number {
  const kb = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1];
  return Number(kb) / 1024;
}
/** Share of one core the process used over the next `ms`. */
async function cpuOver(pid: number, ms: number): Promise<number> {
  const c0 = cpuSeconds(pid);
  const t0 = performance.now();
  await quietPeriod(ms, "the measurement window");
  return (cpuSeconds(pid) - c0) / ((performance.now() - t0) / 1000);
}

beforeAll(async () => {
  // No batch poll: a job can end only through its doorbell or the lrms_done scan.
  env = await testEnv({
    paths: { stateDir },
    lrms: { backend: "fork", pollIntervalMs: 3_600_000 },
    jem: { scanIntervalMs: 2_000, expiryIntervalMs: 60_000 },
  });
  jem = await spawnJem(env.config);
});
afterAll(async () => {
  if (jem) await stopGracefully(jem);
  await env?.close();
  rmSync(stateDir, { recursive: true, force: true });
});

describe("control/events under a flood of names that are not doorbells", () => {
  it("costs bounded CPU and memory, drains, goes back to idle, and still answers doorbells", async () => {
    const pid = jem.pid!;
    const events = env.control.eventsDir();
    await quietPeriod(1_000, "let the JEM's start-up work finish before measuring it idle");
    const idle = await cpuOver(pid, 2_000);
    const rss0 = rssMb(pid);
    const id = await submitTestJob(env, shellJob("sleep 4; echo done"));
    for (let i = 0; i < JUNK; i++) closeSync(openSync(join(events, `junk-${i}`), "w"));

    const busy = await cpuOver(pid, 3_000);
    // Drained by the JEM itself, at a bounded pace.
    await waitFor("junk removed", async () => readdirSync(events).filter((n) => n.startsWith("junk-")).length === 0, 40_000, 500);
    expect((await waitForRest(env, id, ["FINISHED", "FAILED"], 10_000))?.rest).toBe("FINISHED");
    const after = await cpuOver(pid, 3_000);
    const rss1 = rssMb(pid);
    console.log(
      `events flood: idle ${(idle * 100).toFixed(1)}%, during ${(busy * 100).toFixed(1)}%, after ${(after * 100).toFixed(1)}% of a core; RSS ${rss0.toFixed(0)} -> ${rss1.toFixed(0)} MB`,
    );
    expect(busy).toBeLessThan(0.6);
    expect(after).toBeLessThan(idle + 0.05);
    // RSS also holds what the heaps and the allocator keep after the sweeps (they remove in chunks
    // to keep that high-water mark down); it varies between runs, so the bound is on runaway growth.
    expect(rss1 - rss0).toBeLessThan(160);
  }, 60_000);

  it("removes entries of any type without following links, and a directory named like a job id", async () => {
    const events = env.control.eventsDir();
    const victimDir = join(env.stateDir, "victim");
    mkdirSync(victimDir);
    writeFileSync(join(victimDir, "keep"), "precious");
    symlinkSync(victimDir, join(events, "link-to-dir"));
    symlinkSync(join(victimDir, "keep"), join(events, "link-to-file"));
    mkdirSync(join(events, "d/e"), { recursive: true });
    writeFileSync(join(events, "d/e/f"), "x");
    symlinkSync(victimDir, join(events, "d/e/link"));
    const fakeId = "00000000-0000-4000-8000-000000000000";
    mkdirSync(join(events, fakeId));
    symlinkSync(victimDir, join(events, fakeId, "in"));
    execFileSync("mkfifo", [join(events, "fifo")]);
    await waitFor("events emptied", async () => readdirSync(events).length === 0, 10_000, 200);
    expect(readFileSync(join(victimDir, "keep"), "utf8")).toBe("precious");
    expect(existsSync(victimDir)).toBe(true);
  });
});
