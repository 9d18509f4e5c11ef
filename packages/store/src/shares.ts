import { type RestState, isRestState } from "@ce/model";

/*
 * Per-share job counters for GLUE2 (Keys.shareCounts): one HASH field per queue, VO and REST state,
 * moved by the job scripts in the same step as the record's state, so a broker reading /info sees
 * the same numbers as the job listing. A record's `share` field names its counter.
 */

/**
 * VO names as counted and published: lower-case letters, digits and `. _ -`, starting with a letter
 * or digit. The whole name is kept (`vo.example.org`), not only its first word.
 */
const VO_NAME = /^[a-z0-9][a-z0-9._-]{0,127}$/;

/** The VO a name stands for, lower-cased, or undefined when it is not a usable VO name. */
export function normalVo(name: string): string | undefined {
  const vo = name.toLowerCase();
  return VO_NAME.test(vo) ? vo : undefined;
}

/**
 * The VO a job is counted under: the first group component of its primary FQAN (VOMS) or first
 * token group (`/vo.example.org/Role=pilot` → `vo.example.org`). Undefined without groups or for a
 * name outside VO_NAME (such a job still counts in its queue's share).
 */
export function jobVo(fqans: readonly string[] | undefined): string | undefined {
  const first = fqans?.[0];
  const m = first === undefined ? null : /^\/([^/]+)/.exec(first);
  return m ? normalVo(m[1]!) : undefined;
}

/** The `share` field of a new record: `<queue>|<vo>` (queue names never contain `|`: config). */
export function shareField(queue: string, fqans: readonly string[] | undefined): string {
  return `${queue}|${jobVo(fqans) ?? ""}`;
}

/** Job counts by REST state of one queue and VO (`vo` empty: jobs without a VO). */
export interface ShareCount {
  queue: string;
  vo: string;
  byRest: Partial<Record<RestState, number>>;
}

/** HGETALL of Keys.shareCounts → one entry per queue and VO; malformed fields are skipped. */
export function parseShareCounts(h: Record<string, string>): ShareCount[] {
  const out = new Map<string, ShareCount>();
  for (const [field, value] of Object.entries(h)) {
    const a = field.indexOf("|");
    const b = field.lastIndexOf("|");
    if (a < 0 || b === a) continue;
    const rest = field.slice(b + 1) as RestState;
    const n = Number(value);
    if (!isRestState(rest) || !Number.isSafeInteger(n) || n <= 0) continue;
    const queue = field.slice(0, a);
    const vo = field.slice(a + 1, b);
    const key = `${queue}|${vo}`;
    let e = out.get(key);
    if (!e) out.set(key, (e = { queue, vo, byRest: {} }));
    e.byRest[rest] = (e.byRest[rest] ?? 0) + n;
  }
  return [...out.values()];
}
