import { execFile, execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { Redis } from "ioredis";
import { describe, expect, inject, it } from "vitest";
import YAML from "yaml";
import { createMetrics } from "../packages/ops/src/index.js";

const run = promisify(execFile);
const dir = fileURLToPath(new URL("../deploy/monitoring/", import.meta.url));
const HAS_PROMTOOL = (() => {
  try {
    execFileSync("promtool", ["--version"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
})();
if (!HAS_PROMTOOL)
  console.warn("tests/monitoring.test.ts: promtool tests skipped: prometheus is not installed (scripts/ensure-system-deps.sh monitoring)");

/** Every metric name an expression mentions (histogram series by their family's name). */
function metricNames(expr: string): string[] {
  return [...expr.matchAll(/\b((?:ce|process|nodejs)_[a-z0-9_]+)\b/g)].map((m) => m[1]!.replace(/_(bucket|count|sum)$/, ""));
}

describe("deploy/monitoring", () => {
  it.skipIf(!HAS_PROMTOOL)(
    "alert rules are valid and pass their promtool unit tests (each alert fires on its trouble, not on a healthy CE)",
    async () => {
      const check = await run("promtool", ["check", "rules", "alerts.yaml"], { cwd: dir });
      expect(check.stdout).toContain("SUCCESS");
      const test = await run("promtool", ["test", "rules", "alerts.test.yaml"], { cwd: dir }).catch(
        (e: { stdout?: string; stderr?: string }) => {
          throw new Error(`promtool test rules failed:\n${e.stdout ?? ""}${e.stderr ?? ""}`);
        },
      );
      expect(test.stdout).toContain("SUCCESS");
    },
  );

  it("alerts, their tests and the dashboard use only metrics the CE exports", async () => {
    const redis = new Redis(inject("redisUrl"));
    try {
      const exported = new Set(
        (await createMetrics({ redis, prefix: "{mon-names}", role: "gateway" }).registry.getMetricsAsJSON()).map((m) => m.name),
      );
      const rules = YAML.parse(readFileSync(`${dir}alerts.yaml`, "utf8")) as { groups: { rules: { alert: string; expr: string }[] }[] };
      const dash = JSON.parse(readFileSync(`${dir}grafana-dashboard.json`, "utf8")) as {
        panels: { title: string; targets: { expr: string }[] }[];
      };
      const used = [
        ...rules.groups.flatMap((g) => g.rules.map((r) => [`alert ${r.alert}`, r.expr] as const)),
        ...dash.panels.flatMap((p) => p.targets.map((t) => [`panel ${p.title}`, t.expr] as const)),
      ];
      const unknown = used.flatMap(([where, expr]) =>
        metricNames(expr)
          .filter((n) => !exported.has(n))
          .map((n) => `${where}: ${n}`),
      );
      expect(unknown).toEqual([]);
      expect(dash.panels.length).toBeGreaterThan(10);
      // Every alert the brief names is there.
      const names = rules.groups.flatMap((g) => g.rules.map((r) => r.alert));
      expect(names).toEqual(
        expect.arrayContaining(["CEJemHeartbeatStale", "CEJobsStuck", "CERedisUnavailable", "CEBatchSystemFailing", "CEStagingFailing"]),
      );
    } finally {
      redis.disconnect();
    }
  });
});
