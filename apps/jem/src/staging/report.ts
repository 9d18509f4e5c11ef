/**
 * How a staged file is reported: the metric label of its URL, the facts line of `errors`, and its
 * `output_status` line.
 *
 * `output_status` keeps A-REX's FileData shape (`arex-jem.md` §1.4.3): `<pfn> <lfn>`, tokens
 * separated by one space, `\` escaping space, backslash, CR and LF, the session path first. A third
 * token would be read by ARC's parser as a credential path, so facts do not get tokens of their own:
 * the verified checksum travels as the URL's ARC metadata options
 * (`…/file:checksumtype=adler32:checksumvalue=…`), as ARC URLs carry it. Sizes and times are in
 * `statistics` (ARC's per-transfer record) and every fact in `errors`.
 */
import type { StagingProtocol } from "@ce/ops";
import { parseChecksum } from "./checksum.js";
import { redact } from "./http.js";

export type { StagingProtocol } from "@ce/ops";

const KNOWN = new Set<StagingProtocol>(["http", "https", "dav", "davs", "root", "roots", "rucio", "file"]);

/** The metric label of a staging URL (an absolute path is `file`); a scheme outside the set is `other`. */
export function schemeOf(url: string): StagingProtocol {
  if (url.startsWith("/")) return "file";
  const m = /^([a-z][a-z0-9+.-]*):/i.exec(url);
  const s = (m?.[1]?.toLowerCase() ?? "") as StagingProtocol;
  return KNOWN.has(s) ? s : "other";
}

export interface FileFacts {
  /** The replica a `rucio://` input was downloaded from. */
  replica?: string | undefined;
  bytes: number;
  /** `alg:value` verified for this file. */
  checksum?: string | undefined;
  start: Date;
}

/** `resolved by Rucio to <pfn>, 1234 bytes, adler32:0a1b2c3d, 0.42 s`: the facts of one staged file. */
export function fileFacts(f: FileFacts, now = Date.now()): string {
  const parts = [
    ...(f.replica ? [`resolved by Rucio to ${redact(f.replica)}`] : []),
    `${f.bytes} bytes`,
    ...(f.checksum ? [f.checksum] : []),
    `${((now - f.start.getTime()) / 1000).toFixed(2)} s`,
  ];
  return parts.join(", ");
}

const escapeToken = (s: string) => s.replace(/[\\ \r\n]/g, (c) => (c === "\r" ? "\\r" : c === "\n" ? "\\n" : `\\${c}`));

/** `/<name> <url>` with the verified checksum as the URL's metadata when the URL does not name one. */
export function outputStatusLine(name: string, url: string, checksum: string | undefined): string {
  let target = redact(url);
  const spec = parseChecksum(checksum);
  if (spec?.expected && !/:checksumtype=/i.test(target)) target += `:checksumtype=${spec.alg}:checksumvalue=${spec.expected}`;
  return `${escapeToken(`/${name.replace(/^\/+/, "")}`)} ${escapeToken(target)}`;
}

/** The session paths (no leading `/`) listed in `output_status`, escapes undone. */
export function outputStatusNames(text: string): Set<string> {
  const names = new Set<string>();
  for (const line of text.split("\n")) {
    let name = "";
    for (let i = 0; i < line.length; i++) {
      const c = line[i]!;
      if (c === " ") break;
      if (c === "\\" && i + 1 < line.length) {
        const n = line[++i]!;
        name += n === "r" ? "\r" : n === "n" ? "\n" : n;
      } else name += c;
    }
    const rel = name.replace(/^\/+/, "");
    if (rel) names.add(rel);
  }
  return names;
}
