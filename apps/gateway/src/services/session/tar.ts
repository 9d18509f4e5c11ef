/*
 * POSIX tar (ustar, with a pax `path` record for a name ustar cannot hold) for the session
 * archive (archive.ts). Only what that needs: regular files, fixed mode 0644, owner 0, no links.
 * Written here rather than taken from tar-stream: the header is 512 bytes of fixed fields, the
 * names must be checked by us anyway (tar-stream writes `../x` and `/etc/x` as given), and the
 * archive is a web stream pulled file by file with exact sizes known up front.
 */

export const BLOCK = 512;
/** The largest size ustar's 11 octal digits hold (8 GiB − 1); the archive bound stays below. */
export const USTAR_MAX_SIZE = 0o77777777777;

export interface TarEntry {
  /** Path inside the archive: relative, `/`-separated, no empty, `.` or `..` component. */
  name: string;
  size: number;
  mtimeMs: number;
}

/** Bytes of padding after `size` bytes of content. */
export const padding = (size: number) => (BLOCK - (size % BLOCK)) % BLOCK;

/** True for a name that extracts inside the directory tar is run in. */
export function safeName(name: string): boolean {
  if (name === "" || name.includes("\0") || name.startsWith("/")) return false;
  return name.split("/").every((p) => p !== "" && p !== "." && p !== "..");
}

/** The header block(s) of one regular file: a pax record first when ustar cannot hold the name. */
export function fileHeader(e: TarEntry): Buffer {
  if (!safeName(e.name)) throw new Error(`unsafe name in archive: ${JSON.stringify(e.name)}`);
  if (!Number.isSafeInteger(e.size) || e.size < 0 || e.size > USTAR_MAX_SIZE) throw new Error(`size ${e.size} does not fit ustar`);
  const mtime = Math.max(0, Math.floor(e.mtimeMs / 1000));
  const split = ustarName(e.name);
  if (split) return block({ ...split, size: e.size, mtime, type: "0" });
  const record = paxRecord("path", e.name);
  const body = Buffer.alloc(record.length + padding(record.length));
  record.copy(body);
  // Under a pax record the ustar name is what a reader without pax would use: a short, safe stand-in.
  const stand = asciiTail(e.name, 80);
  return Buffer.concat([
    block({ name: `PaxHeaders/${stand}`, prefix: "", size: record.length, mtime, type: "x" }),
    body,
    block({ name: stand, prefix: "", size: e.size, mtime, type: "0" }),
  ]);
}

/** Two zero blocks end an archive. */
export const trailer = () => Buffer.alloc(2 * BLOCK);

/** Name and prefix fields for `name` (ustar joins them with `/`), or undefined when it cannot. */
function ustarName(name: string): { name: string; prefix: string } | undefined {
  if (Buffer.byteLength(name) <= 100) return { name, prefix: "" };
  for (let i = name.indexOf("/"); i >= 0; i = name.indexOf("/", i + 1)) {
    const prefix = name.slice(0, i);
    const rest = name.slice(i + 1);
    if (Buffer.byteLength(prefix) > 155) break;
    if (Buffer.byteLength(rest) <= 100) return { name: rest, prefix };
  }
  return undefined;
}

/** The end of `name`'s last component in printable ASCII, at most `max` bytes (never empty, never `..`). */
function asciiTail(name: string, max: number): string {
  const last = (name.split("/").at(-1) ?? "").replace(/[^\x21-\x7e]/g, "_").slice(-max);
  return /^\.*$/.test(last) ? "file" : last;
}

/** One pax extended-header record: `<length> <key>=<value>\n`, the length counting itself. */
export function paxRecord(key: string, value: string): Buffer {
  const rest = Buffer.byteLength(` ${key}=${value}\n`);
  let len = rest + String(rest).length;
  if (String(len).length > String(rest).length) len = rest + String(len).length;
  return Buffer.from(`${len} ${key}=${value}\n`, "utf8");
}

function block(h: { name: string; prefix: string; size: number; mtime: number; type: "0" | "x" }): Buffer {
  const b = Buffer.alloc(BLOCK);
  b.write(h.name, 0, 100, "utf8");
  octal(b, 100, 8, 0o644);
  octal(b, 108, 8, 0);
  octal(b, 116, 8, 0);
  octal(b, 124, 12, h.size);
  octal(b, 136, 12, h.mtime);
  b.write(h.type, 156, 1, "ascii");
  b.write("ustar\0", 257, 6, "ascii");
  b.write("00", 263, 2, "ascii");
  b.write(h.prefix, 345, 155, "utf8");
  // The checksum is the byte sum with its own field read as eight spaces.
  b.fill(0x20, 148, 156);
  let sum = 0;
  for (const x of b) sum += x;
  b.write(`${sum.toString(8).padStart(6, "0")}\0 `, 148, 8, "ascii");
  return b;
}

/** `value` as zero-padded octal filling `len − 1` bytes, NUL-terminated. */
function octal(b: Buffer, at: number, len: number, value: number): void {
  b.write(`${value.toString(8).padStart(len - 1, "0")}\0`, at, len, "ascii");
}
