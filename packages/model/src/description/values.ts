/** Value syntaxes shared by the xRSL and ADL readers: durations, timestamps, URLs with options. */

const NUM = String.raw`(\d+(?:\.\d+)?)`;
const ISO_DURATION = new RegExp(`^P(?:${NUM}Y)?(?:${NUM}M)?(?:${NUM}W)?(?:${NUM}D)?(?:T(?:${NUM}H)?(?:${NUM}M)?(?:${NUM}S)?)?$`, "i");
const UNIT_SECONDS: Record<string, number> = { w: 604800, d: 86400, h: 3600, m: 60, s: 1 };

export const MINUTE = 60;
export const SECOND = 1;

/**
 * Parses a duration into whole seconds the way ARC's `Period` reads it: an ISO-8601 duration
 * (`PT1H30M`; Y = 365 d, M = 30 d), or a sequence of numbers each followed (after optional
 * blanks) by a unit word named by its first letter — w(eeks), d(ays), h(ours), m(inutes),
 * s(econds), any case, so `1h30m`, `2 minutes`, `1 hour 30 minutes` — where a final number
 * without unit, or a bare number, is in `bareUnitSeconds` (xRSL: minutes, docs/decisions.md #21;
 * ADL: seconds). Returns undefined when it is none of these.
 */
export function parseDuration(text: string, bareUnitSeconds: number): number | undefined {
  const s = text.trim();
  if (s === "") return undefined;
  if (s[0] === "P" || s[0] === "p") return parseIsoDuration(s);
  const token = /(\d+(?:\.\d+)?)[ \t]*([A-Za-z]*)[ \t]*/y;
  let total = 0;
  for (let at = 0; at < s.length;) {
    token.lastIndex = at;
    const m = token.exec(s);
    if (!m) return undefined;
    at = token.lastIndex;
    const word = m[2] as string;
    // A number without unit counts in the bare unit, and only as the last one (`1h30`, `90`).
    const unit = word === "" ? (at === s.length ? bareUnitSeconds : undefined) : UNIT_SECONDS[(word[0] as string).toLowerCase()];
    if (unit === undefined) return undefined;
    total += Number(m[1]) * unit;
  }
  return Math.round(total);
}

function parseIsoDuration(s: string): number | undefined {
  const iso = ISO_DURATION.exec(s);
  if (!iso || s.toUpperCase() === "P" || /T$/i.test(s)) return undefined;
  const [, y, mo, w, d, h, mi, sec] = iso.map((x) => (x === undefined ? 0 : Number(x)));
  const total =
    (y ?? 0) * 365 * 86400 + (mo ?? 0) * 30 * 86400 + (w ?? 0) * 604800 + (d ?? 0) * 86400 + (h ?? 0) * 3600 + (mi ?? 0) * 60 + (sec ?? 0);
  return Math.round(total);
}

/**
 * Parses an absolute time: ISO-8601 (`2025-03-01T12:00:00Z`, zone optional = UTC) or the
 * compact `YYYYMMDDHHMMSSZ` form A-REX writes. Returns undefined for anything else.
 */
export function parseTimestamp(text: string): Date | undefined {
  const s = text.trim();
  const compact = /^(\d{4})(\d{2})(\d{2})(\d{2})(\d{2})(\d{2})Z?$/.exec(s);
  if (compact) {
    const [, y, mo, d, h, mi, se] = compact.map(Number) as number[];
    return checkedDate(Date.UTC(y!, mo! - 1, d!, h!, mi!, se!), s);
  }
  const iso = /^(\d{4}-\d{2}-\d{2})(?:[T ](\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?))?(Z|[+-]\d{2}:?\d{2})?$/i.exec(s);
  if (!iso) return undefined;
  const zone = iso[3] ? iso[3].toUpperCase().replace(/^([+-]\d{2})(\d{2})$/, "$1:$2") : "Z";
  return checkedDate(Date.parse(`${iso[1]}T${iso[2] ?? "00:00:00"}${zone}`), s);
}

function checkedDate(ms: number, source: string): Date | undefined {
  if (!Number.isFinite(ms)) return undefined;
  const d = new Date(ms);
  // Date.UTC rolls 2025-02-31 over silently; reject dates whose month or day part changed.
  const ymd = /^(\d{4})-?(\d{2})-?(\d{2})/.exec(source);
  const hasOffset = /[+-]\d{2}:?\d{2}$/.test(source);
  if (ymd && !hasOffset && (Number(ymd[2]) !== d.getUTCMonth() + 1 || Number(ymd[3]) !== d.getUTCDate())) {
    return undefined;
  }
  return d;
}

/** xRSL / ADL booleans: yes/no/true/false (ADL also 1/0). Undefined when not a boolean. */
export function parseBoolean(text: string): boolean | undefined {
  const s = text.trim().toLowerCase();
  if (s === "yes" || s === "true" || s === "1") return true;
  if (s === "no" || s === "false" || s === "0") return false;
  return undefined;
}

/** A whole number, possibly negative (range checks are done by validation). */
export function parseInteger(text: string): number | undefined {
  const s = text.trim();
  if (!/^[+-]?\d+$/.test(s)) return undefined;
  const n = Number(s);
  return Number.isSafeInteger(n) ? n : undefined;
}

export interface UrlWithOptions {
  url: string;
  options: Record<string, string>;
}

/**
 * Splits ARC URL options written after the host (`gsiftp://host;cache=no;threads=2/path`) off
 * the URL. Returns undefined when an option has no `=`.
 */
export function splitUrlOptions(raw: string): UrlWithOptions | undefined {
  const m = /^([a-zA-Z][a-zA-Z0-9+.-]*:\/\/)([^/?#]*)(.*)$/s.exec(raw);
  if (!m) return { url: raw, options: {} };
  const [host, ...opts] = (m[2] as string).split(";");
  const options: Record<string, string> = {};
  for (const o of opts) {
    const eq = o.indexOf("=");
    if (eq <= 0) return undefined;
    options[o.slice(0, eq)] = o.slice(eq + 1);
  }
  return { url: `${m[1]}${host}${m[3]}`, options };
}
