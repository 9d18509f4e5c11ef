/**
 * One convention for every fuzz/property target (fast-check). `pnpm test` runs each target with a
 * quick budget; `pnpm fuzz` (scripts/fuzz.sh) sets CE_FUZZ_RUNS=100000 and runs only the
 * `*.fuzz.test.ts` files, and each target appends a line with its case count and cases/s to
 * CE_FUZZ_REPORT so the script can print one table.
 */
import { appendFileSync } from "node:fs";
import fc from "fast-check";

/** Cases per target: the quick budget unless `pnpm fuzz` asked for more. */
export function fuzzRuns(quick = 200): number {
  const n = Number(process.env.CE_FUZZ_RUNS);
  return Number.isFinite(n) && n > 0 ? n : quick;
}

/**
 * fc.assert with the shared budget and a report line. The property must not throw for any input:
 * a finding is a counterexample fast-check shrinks and prints, which fails the test.
 */
export async function fuzz<T>(name: string, arb: fc.Arbitrary<T>, check: (v: T) => unknown, quick = 200): Promise<void> {
  const runs = fuzzRuns(quick);
  const t0 = performance.now();
  let findings = 0;
  let n = 0;
  try {
    await fc.assert(
      fc.asyncProperty(arb, async (v) => {
        // Long synchronous runs would starve vitest's worker messages (onTaskUpdate time-outs).
        if (++n % 256 === 0) await new Promise((r) => setImmediate(r));
        await check(v);
      }),
      { numRuns: runs, endOnFailure: true },
    );
  } catch (e) {
    findings = 1;
    throw e;
  } finally {
    const secs = (performance.now() - t0) / 1000;
    const report = process.env.CE_FUZZ_REPORT;
    if (report) {
      appendFileSync(report, `${JSON.stringify({ name, runs, secs, perSec: Math.round(runs / Math.max(secs, 1e-6)), findings })}\n`);
    }
  }
}

export { fc };
