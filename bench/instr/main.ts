/**
 * `pnpm bench:instr`: instructions per operation (bench/instr/measure.ts), printed next to the wall
 * times and written to bench/results/instr-<time>.json.
 * `pnpm bench:check`: the same on the small sizes, compared with bench/baseline.json; exits 1 when
 * a figure grew more than BENCH_CHECK_TOLERANCE (0.10) over its baseline, naming it with both
 * numbers. `pnpm bench:check --update` writes the measured figures as the new baseline.
 * `--from=bench/results/instr-<time>.json` takes the figures of an earlier run instead of measuring.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { machine } from "../lib/proc.js";
import { ROOT, versions } from "../lib/servers.js";
import { SMALL, measure, wanted, type Figure } from "./measure.js";

const check = process.argv.includes("--check");
const update = process.argv.includes("--update");
const TOLERANCE = Number(process.env.BENCH_CHECK_TOLERANCE ?? 0.1);
const BASELINE = join(ROOT, "bench/baseline.json");
const log = (s: string) => console.error(s);

if (update && process.env.BENCH_INSTR_ONLY) {
  console.error("bench:check --update measures every figure: unset BENCH_INSTR_ONLY");
  process.exit(2);
}
// --from=<bench/results/instr-*.json>: compare (or make the baseline from) a run already made.
const from = process.argv.find((a) => a.startsWith("--from="))?.slice("--from=".length);
const t0 = Date.now();
const before = machine();
const earlier = from
  ? (JSON.parse(readFileSync(from, "utf8")) as { figures: Record<string, Figure>; versions: Record<string, string> })
  : undefined;
const figures = earlier ? earlier.figures : await measure(SMALL, log);
const seconds = Math.round((Date.now() - t0) / 1000);
const fmt = (n: number) => n.toLocaleString("en-US");
console.log(`| operation | process | instructions per unit | unit | wall ms (median of one round, under valgrind) |`);
console.log(`|---|---|---|---|---|`);
for (const [k, f] of Object.entries(figures)) console.log(`| ${k} | ${f.process} | ${fmt(f.instructions)} | ${f.unit} | ${f.wallMs} |`);
const result = {
  bench: "instr",
  sizes: SMALL,
  figures,
  seconds,
  machine: { before, after: machine() },
  versions: earlier?.versions ?? versions(),
};
const dir = join(ROOT, "bench/results");
mkdirSync(dir, { recursive: true });
if (!from) writeFileSync(join(dir, `instr-${new Date().toISOString().replace(/[:.]/g, "-")}.json`), `${JSON.stringify(result, null, 1)}\n`);
console.log(
  JSON.stringify({ bench: "instr", seconds, figures: Object.fromEntries(Object.entries(figures).map(([k, f]) => [k, f.instructions])) }),
);

if (update) {
  // Figures the old baseline marks unchecked stay so (bench/README.md says why).
  const old = existsSync(BASELINE)
    ? (JSON.parse(readFileSync(BASELINE, "utf8")) as { figures: Record<string, { checked?: boolean }> }).figures
    : {};
  for (const [k, f] of Object.entries(figures)) if (old[k]?.checked === false) Object.assign(f, { checked: false });
  const baseline = {
    note: "instructions per unit, bench/instr (pnpm bench:check --update)",
    sizes: SMALL,
    versions: result.versions,
    figures,
  };
  writeFileSync(BASELINE, `${JSON.stringify(baseline, null, 1)}\n`);
  console.log(`bench:check: baseline written to bench/baseline.json`);
} else if (check) {
  if (!existsSync(BASELINE)) {
    console.error("bench:check: no bench/baseline.json (make one with `pnpm bench:check --update`)");
    process.exit(2);
  }
  const base = (JSON.parse(readFileSync(BASELINE, "utf8")) as { figures: Record<string, Figure> }).figures;
  const grown: string[] = [];
  for (const [k, b] of Object.entries(base) as Array<[string, Figure & { checked?: boolean }]>) {
    if (!wanted(k)) continue;
    if (b.checked === false) {
      console.log(
        `bench:check: ${k}: ${fmt(figures[k]?.instructions ?? NaN)} (not checked: it moves more than the tolerance between runs, bench/README.md)`,
      );
      continue;
    }
    const now = figures[k];
    if (!now) {
      grown.push(`${k}: in the baseline but not measured`);
      continue;
    }
    const ratio = now.instructions / b.instructions;
    const line = `${k}: ${fmt(now.instructions)} instructions per ${now.unit} vs baseline ${fmt(b.instructions)} (${ratio >= 1 ? "+" : ""}${((ratio - 1) * 100).toFixed(1)} %)`;
    console.log(`bench:check: ${line}`);
    if (ratio > 1 + TOLERANCE) grown.push(line);
  }
  if (grown.length) {
    console.error(`bench:check: FAILED, grew more than ${TOLERANCE * 100} % over bench/baseline.json:\n  ${grown.join("\n  ")}`);
    process.exit(1);
  }
  const checked = Object.entries(base).filter(([k, b]) => wanted(k) && (b as { checked?: boolean }).checked !== false).length;
  console.log(`bench:check: ${checked} checked figures within ${TOLERANCE * 100} % of the baseline (${seconds} s)`);
}
// Nothing is left to wait for (the CE is stopped); a leftover handle must not keep the command alive.
process.exit(0);
