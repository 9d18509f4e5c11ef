import { OpsError } from "../ops.js";
import { summary, summaryColumns, type SummaryBy } from "../insight.js";
import type { CliContext } from "./jobs.js";
import { cut, table } from "./format.js";

/** `ceadm summary [--by vo|owner|state] [--active] [--limit N]`: jobs per group and REST state. */
export async function summaryCommand(
  c: CliContext & { values: { by?: string | undefined; active?: boolean | undefined } },
): Promise<number> {
  const byList = (c.values.by ?? "vo,owner").split(",").map((s) => s.trim());
  const bad = byList.filter((b) => !["vo", "owner", "state"].includes(b));
  if (bad.length) throw new OpsError("BAD_REQUEST", `--by ${bad.join(",")}: one of vo, owner, state`);
  const limit = c.values.limit ? Number(c.values.limit) : 20;
  const results = await Promise.all(
    byList.map(async (by) => [by, await summary(c.ops.redis, c.ops.prefix, by as SummaryBy, { activeOnly: c.values.active })] as const),
  );
  if (c.json) {
    c.out(JSON.stringify(Object.fromEntries(results), null, 2));
    return 0;
  }
  const parts = results.map(([by, s]) => {
    const cols = summaryColumns(s);
    const shown = s.groups.slice(0, limit);
    const more = s.groups.length - shown.length;
    return `${table(
      [by.toUpperCase(), "TOTAL", ...cols],
      shown.map((g) => [cut(g.key, 60), g.total, ...cols.map((st) => g.states[st] ?? 0)]),
    )}${more > 0 ? `\n(${more} more; --limit N)` : ""}`;
  });
  c.out(`${parts.join("\n\n")}\n\n${results[0]?.[1].total ?? 0} job(s)${c.values.active ? " in active states" : ""}`);
  return 0;
}
