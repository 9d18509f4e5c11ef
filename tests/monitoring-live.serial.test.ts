import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import YAML from "yaml";
import { freePort, quietPeriod, waitFor } from "@ce/testing";
import { startStack, type Stack } from "@ce/testing/stack";

/**
 * A real Prometheus (Debian's) scrapes a running CE with the shipped alert rules: the JEM
 * heartbeat alert fires when the JEM is stopped (SIGSTOP) and clears when it continues. Short
 * intervals keep it to seconds: the JEM beats every second (stale after 3 s), Prometheus scrapes
 * and evaluates every second, and every `for:` of the rules is shortened to 2 s.
 */
const HAS_PROMETHEUS = (() => {
  try {
    execFileSync("prometheus", ["--version"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
})();
if (!HAS_PROMETHEUS)
  console.warn("tests/monitoring-live.serial.test.ts skipped: prometheus is not installed (scripts/ensure-system-deps.sh monitoring)");

const rulesFile = fileURLToPath(new URL("../deploy/monitoring/alerts.yaml", import.meta.url));
let stack: Stack | undefined;
let prom: ChildProcess | undefined;
let promUrl = "";
let dir = "";

interface Alert {
  labels: { alertname: string };
  state: "pending" | "firing";
}

async function alerts(): Promise<Alert[]> {
  const r = (await (await fetch(`${promUrl}/api/v1/alerts`)).json()) as { data: { alerts: Alert[] } };
  return r.data.alerts;
}
async function query(q: string): Promise<{ metric: Record<string, string>; value: [number, string] }[]> {
  const r = (await (await fetch(`${promUrl}/api/v1/query?query=${encodeURIComponent(q)}`)).json()) as {
    data: { result: { metric: Record<string, string>; value: [number, string] }[] };
  };
  return r.data.result;
}
async function until<T>(what: string, ms: number, probe: () => Promise<T | undefined | false>): Promise<T> {
  return waitFor(what, async () => (await probe()) || undefined, ms, {
    everyMs: 250,
    retryErrors: true,
    detail: () => (dir ? readFileSync(join(dir, "prometheus.log"), "utf8").slice(-2000) : ""),
  });
}
const state = async (name: string) => (await alerts()).find((a) => a.labels.alertname === name)?.state;

beforeAll(async () => {
  if (!HAS_PROMETHEUS) return;
  stack = await startStack({
    redisUrl: inject("redisUrl"),
    redisUsers: inject("redisUsers"),
    config: { jem: { heartbeatIntervalMs: 1000 } },
  });
  const cfg = YAML.parse(readFileSync(stack.config, "utf8")) as { admin: { port: number; jemPort: number } };
  dir = mkdtempSync(join(tmpdir(), "ce-prom-"));
  // The shipped rules, with every `for:` shortened: the same expressions are under test.
  const rules = YAML.parse(readFileSync(rulesFile, "utf8")) as { groups: { rules: { for?: string }[] }[] };
  for (const g of rules.groups) for (const r of g.rules) if (r.for) r.for = "2s";
  writeFileSync(join(dir, "alerts.yaml"), YAML.stringify(rules));
  writeFileSync(join(dir, "token"), stack.adminToken, { mode: 0o600 });
  writeFileSync(
    join(dir, "prometheus.yml"),
    YAML.stringify({
      global: { scrape_interval: "1s", scrape_timeout: "1s", evaluation_interval: "1s" },
      rule_files: [join(dir, "alerts.yaml")],
      scrape_configs: [
        {
          job_name: "ce",
          authorization: { credentials_file: join(dir, "token") },
          static_configs: [{ targets: [`127.0.0.1:${cfg.admin.port}`, `127.0.0.1:${cfg.admin.jemPort}`] }],
        },
      ],
    }),
  );
  const port = await freePort();
  promUrl = `http://127.0.0.1:${port}`;
  const log = openSync(join(dir, "prometheus.log"), "a");
  prom = spawn(
    "prometheus",
    [
      `--config.file=${join(dir, "prometheus.yml")}`,
      `--storage.tsdb.path=${join(dir, "data")}`,
      `--web.listen-address=127.0.0.1:${port}`,
      "--log.level=warn",
    ],
    { stdio: ["ignore", log, log] },
  );
  await until("Prometheus to answer", 30_000, async () => (await fetch(`${promUrl}/-/ready`)).ok);
}, 180_000);

afterAll(async () => {
  if (stack?.jemPid) {
    try {
      process.kill(stack.jemPid, "SIGCONT"); // a stopped JEM cannot handle the stack's SIGTERM
    } catch {
      // already gone
    }
  }
  if (prom && prom.exitCode === null && !prom.signalCode) {
    const p = prom;
    await new Promise<void>((res) => {
      const t = setTimeout(() => p.kill("SIGKILL"), 5_000);
      p.once("exit", () => (clearTimeout(t), res()));
      p.kill("SIGTERM");
    });
  }
  await stack?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe.skipIf(!HAS_PROMETHEUS)("Prometheus scraping a running CE", () => {
  it("fires the JEM heartbeat alert while the JEM is stopped (SIGSTOP) and clears it when it continues (SIGCONT)", async () => {
    const s = stack!;
    // Healthy: both admin listeners scraped, a fresh heartbeat, Redis reachable, no heartbeat alert.
    await until("both CE targets up", 30_000, async () => (await query('up{job="ce"} == 1')).length === 2);
    await until(
      "the JEM heartbeat",
      30_000,
      async () => (await query("time() - max(ce_jem_heartbeat_timestamp_seconds) < 3")).length === 1,
    );
    expect((await query("min(ce_redis_up)"))[0]?.value[1]).toBe("1");
    await quietPeriod(4_000, "longer than stale (3 s) + for (2 s): a healthy JEM must raise no alert");
    expect(await state("CEJemHeartbeatStale")).toBeUndefined();

    const t0 = Date.now();
    process.kill(s.jemPid!, "SIGSTOP");
    await until("CEJemHeartbeatStale to fire", 30_000, async () => (await state("CEJemHeartbeatStale")) === "firing");
    const fired = Date.now() - t0;
    // The gateway still answers and still reports the JEM's last beat, now old.
    expect(Number((await query("time() - max(ce_jem_heartbeat_timestamp_seconds)"))[0]?.value[1])).toBeGreaterThan(3);

    const t1 = Date.now();
    process.kill(s.jemPid!, "SIGCONT");
    await until("CEJemHeartbeatStale to clear", 30_000, async () => (await state("CEJemHeartbeatStale")) === undefined);
    const cleared = Date.now() - t1;
    console.log(`heartbeat alert fired ${fired} ms after SIGSTOP, cleared ${cleared} ms after SIGCONT`);
    expect(s.exited()).toEqual([]);
  }, 120_000);
});
