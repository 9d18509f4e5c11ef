import { bytesInWords } from "@ce/model";
import { type Colour, paint } from "./colour.js";

/**
 * Plain aligned columns; good enough for a terminal and for `grep`/`awk`. With `colour` (a TTY:
 * cli/colour.ts) the head is bold and `paintCell` may colour a cell, after the padding.
 */
export function table(
  headers: string[],
  rows: (string | number | undefined)[][],
  opts: { colour?: boolean; paintCell?: (col: number, value: string) => Colour | undefined } = {},
): string {
  const cells = [headers, ...rows.map((r) => r.map((v) => (v === undefined ? "-" : String(v))))];
  const widths = headers.map((_, i) => Math.max(...cells.map((r) => r[i]?.length ?? 0)));
  const on = opts.colour === true;
  return cells
    .map((r, row) =>
      r
        .map((v, i) => {
          const padded = i === r.length - 1 ? v : v.padEnd(widths[i]!);
          if (!on) return padded;
          // The padding stays outside the escape codes of a coloured cell.
          const c = row === 0 ? "bold" : opts.paintCell?.(i, v);
          return c ? `${paint(true, c, v)}${padded.slice(v.length)}` : padded;
        })
        .join("  "),
    )
    .join("\n");
}

/** Bytes for people (`23 MiB`), the pages' rounding; `--json` keeps the exact numbers. */
export const size = (n: number | undefined) => (n === undefined ? undefined : bytesInWords(n));

export const iso = (ms: number | undefined) => (ms ? new Date(ms).toISOString().replace(/\.\d+Z$/, "Z") : undefined);

/** A duration in its two largest units: `3d4h`, `2h5m`, `4m10s`, `12s`. */
export function ago(seconds: number): string {
  const s = Math.max(0, Math.floor(seconds));
  const units: [string, number][] = [
    ["d", 86_400],
    ["h", 3600],
    ["m", 60],
    ["s", 1],
  ];
  const i = units.findIndex(([, n]) => s >= n);
  if (i < 0) return "0s";
  const [u1, n1] = units[i]!;
  const rest = s % n1;
  const next = units[i + 1];
  return next && rest >= next[1] ? `${Math.floor(s / n1)}${u1}${Math.floor(rest / next[1])}${next[0]}` : `${Math.floor(s / n1)}${u1}`;
}

/** Long free text (job names, DNs) cut for a column. */
export const cut = (s: string | undefined, n: number) => (s === undefined ? undefined : s.length > n ? `${s.slice(0, n - 1)}…` : s);
