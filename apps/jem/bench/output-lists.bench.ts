/**
 * `@list` outputs at FINISHING (`pnpm bench`; alone: `node --import tsx apps/jem/bench/output-lists.bench.ts`):
 * the JEM's own outputPlan + purgeSession on a real session directory, for the worst case the
 * caps allow and for the case of issue 33. Worst case: `staging.maxOutputListLines` (100,000)
 * names in ten lists of 10,000 (the per-list cap) that name files that do not exist, beside
 * BENCH_LIST_FILES (100,000) files the purge must compare and remove, half of them one level deeper
 * under a directory that is the parent of every listed name (so every entry there asks "is this
 * the parent of a kept name?"). Issue 33's case: 20,000 files, five lists of 10,000. Reported:
 * wall and CPU (user+system) of the plan and of the purge; table, JSON line and
 * bench/results/output-lists-<time>.json.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { compileConfig } from "@ce/config";
import { emptyDescription, type OutputFile } from "@ce/model";
import { outputPlan, purgeSession } from "../src/staging/outputs.js";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "../../..");
const FILES = Number(process.env.BENCH_LIST_FILES ?? 100_000);
const cap = compileConfig({ paths: { stateDir: tmpdir() } }, tmpdir()).staging.maxOutputListLines;

const out = (name: string): OutputFile => ({ name, options: {}, useIfSuccess: true, useIfFailure: false, useIfCancel: false });

async function run(label: string, files: number, lists: number, linesPerList: number) {
  const session = await mkdtemp(join(tmpdir(), "bench-outlists-"));
  try {
    // Half the files at the top, half in d/ (the listed names' parent: each asks the prefix search).
    mkdirSync(join(session, "d"));
    for (let i = 0; i < files; i++) writeFileSync(join(session, i % 2 ? `d/f${i}` : `f${i}`), "");
    for (let l = 1; l <= lists; l++) {
      const names = Array.from({ length: linesPerList }, (_, i) => `d/missing-${l}-${i}\n`).join("");
      writeFileSync(join(session, `list${l}`), names);
    }
    const desc = { ...emptyDescription("nordugrid:xrsl"), outputFiles: Array.from({ length: lists }, (_, l) => out(`@list${l + 1}`)) };
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    const plan = await outputPlan(session, desc, "success", 0, cap);
    const t1 = performance.now();
    const c1 = process.cpuUsage(c0);
    const removed = await purgeSession(session, plan);
    const t2 = performance.now();
    const c2 = process.cpuUsage(c0);
    if (plan.refused.length > 0) throw new Error(`refused: ${plan.refused.join("; ")}`);
    if (removed !== files) throw new Error(`removed ${removed} of ${files}`);
    return {
      label,
      files,
      listedNames: lists * linesPerList,
      planMs: Math.round(t1 - t0),
      planCpuMs: Math.round((c1.user + c1.system) / 1000),
      purgeMs: Math.round(t2 - t1),
      purgeCpuMs: Math.round((c2.user + c2.system - c1.user - c1.system) / 1000),
    };
  } finally {
    await rm(session, { recursive: true, force: true });
  }
}

const rows = [
  await run("issue 33: 20,000 files, 5 × 10,000 names", 20_000, 5, 10_000),
  await run(`worst allowed: ${FILES} files, ${cap} names in ${cap / 10_000} lists`, FILES, cap / 10_000, 10_000),
];
console.table(rows);
const load = (await import("node:os")).loadavg()[0]!.toFixed(1);
const result = { bench: "output-lists", load, rows };
mkdirSync(join(ROOT, "bench/results"), { recursive: true });
writeFileSync(
  join(ROOT, "bench/results", `output-lists-${new Date().toISOString().replace(/[:.]/g, "-")}.json`),
  `${JSON.stringify(result, null, 2)}\n`,
);
console.log(JSON.stringify(result));
