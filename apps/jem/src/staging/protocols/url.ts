/**
 * ARC transfer URLs as they reach the stager (production-site.md §2.1): `;opt=val` options after
 * the host, an optional `?query`, and metadata options at the very end of the path
 * (`…/file:checksumtype=adler32:checksumvalue=3d1ae86e`, as the PanDA pilot writes output.list
 * lines). The wire URL keeps none of the ARC-only parts.
 */
import { splitUrlOptions } from "@ce/model";
import { TransferError } from "../http.js";

export interface TransferUrl {
  /** The URL as sent on the wire (options and metadata removed). */
  url: string;
  /** Lower-case scheme without the colon: `https`, `davs`, `root`, `file`, … */
  scheme: string;
  /** URL options: the file's own (description) over those embedded in the URL. */
  options: Record<string, string>;
  /** Expected checksum from the metadata options, `alg:value`. */
  checksum?: string | undefined;
}

const META = /:(checksumtype|checksumvalue|guid)=([^:/?#]*)$/i;

export function parseTransferUrl(raw: string, fileOptions: Record<string, string> = {}): TransferUrl {
  const split = splitUrlOptions(raw);
  if (!split) throw new TransferError(`URL has an option without '=value'`, false);
  let url = split.url;
  const scheme = (/^([a-z][a-z0-9+.-]*):/i.exec(url)?.[1] ?? "").toLowerCase();
  const q = url.indexOf("?");
  // root:// paths may carry `?` CGI that itself ends in `:x=y`; metadata is not looked for there.
  let head = q >= 0 ? url.slice(0, q) : url;
  const tail = q >= 0 ? url.slice(q) : "";
  const meta: Record<string, string> = {};
  if (!(scheme === "root" && q >= 0)) {
    for (let m = META.exec(head); m; m = META.exec(head)) {
      meta[m[1]!.toLowerCase()] = m[2]!;
      head = head.slice(0, m.index);
    }
  }
  url = head + tail;
  const type = meta.checksumtype?.toLowerCase();
  const value = meta.checksumvalue?.toLowerCase();
  return {
    url,
    scheme,
    options: { ...split.options, ...fileOptions },
    checksum: type && value ? `${type}:${value}` : undefined,
  };
}

/** WebDAV is HTTP on the wire (ARC's http plugin serves dav/davs the same way). */
export function davToHttp(url: string): string {
  return url.replace(/^dav(s?):/i, (_m, s: string) => `http${s}:`);
}

/**
 * The checksum a transfer is checked with, ARC's order: a value the URL (or the description)
 * names, else the type from `checksum=`; `checksum=no` turns checking off. Undefined = none.
 */
export function expectedChecksum(t: TransferUrl, described?: string): string | undefined {
  const opt = t.options.checksum?.toLowerCase();
  if (opt === "no") return undefined;
  return described ?? t.checksum ?? (opt && opt !== "" ? opt : undefined);
}
