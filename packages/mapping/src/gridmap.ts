import { readFile, stat } from "node:fs/promises";

/** One usable grid-mapfile line: the DN and its accounts (the first one is used). */
export interface GridMapEntry {
  dn: string;
  accounts: string[];
  line: number;
}

export interface GridMap {
  /** DN → entry; the first line for a DN wins (as in Globus). */
  entries: Map<string, GridMapEntry>;
  /** Lines that do not parse, `line N: reason`; they are skipped. */
  warnings: string[];
}

/**
 * The standard grid-mapfile (Globus `gss_assist`): `"DN" account[,account…]` per line, the DN
 * quoted when it holds spaces, `\` escaping the next character inside quotes and `\xHH` giving a
 * byte (OpenSSL's escaping of UTF-8 DNs). Blank lines and lines starting with `#` are ignored; so is
 * anything after a `#` that follows the accounts.
 */
export function parseGridMap(text: string): GridMap {
  const entries = new Map<string, GridMapEntry>();
  const warnings: string[] = [];
  text.split(/\r?\n/).forEach((raw, i) => {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) return;
    const r = parseLine(line);
    if (typeof r === "string") warnings.push(`line ${i + 1}: ${r}`);
    else if (!entries.has(r.dn)) entries.set(r.dn, { ...r, line: i + 1 });
  });
  return { entries, warnings };
}

function parseLine(line: string): { dn: string; accounts: string[] } | string {
  let dn: string;
  let rest: string;
  if (line.startsWith('"')) {
    const bytes: number[] = [];
    let i = 1;
    for (;;) {
      if (i >= line.length) return "unterminated quoted DN";
      const c = line[i]!;
      if (c === '"') break;
      if (c === "\\") {
        const hex = /^x([0-9A-Fa-f]{2})/.exec(line.slice(i + 1));
        if (hex) {
          bytes.push(parseInt(hex[1]!, 16));
          i += 4;
          continue;
        }
        if (i + 1 >= line.length) return "unterminated quoted DN";
        i++;
      }
      const cp = line.codePointAt(i)!;
      bytes.push(...Buffer.from(String.fromCodePoint(cp), "utf8"));
      i += cp > 0xffff ? 2 : 1;
    }
    dn = Buffer.from(bytes).toString("utf8");
    rest = line.slice(i + 1);
    if (rest !== "" && !/^\s/.test(rest)) return "no space after the quoted DN";
  } else {
    const m = /^(\S+)(.*)$/s.exec(line)!; // s: a stray CR inside a line is text, not an end
    dn = m[1]!;
    rest = m[2]!;
  }
  const hash = rest.indexOf("#");
  if (hash >= 0) rest = rest.slice(0, hash);
  const accounts = rest
    .split(",")
    .map((a) => a.trim())
    .filter((a) => a !== "");
  if (dn === "") return "empty DN";
  if (accounts.length === 0) return "no account after the DN";
  const bad = accounts.find((a) => /\s/.test(a));
  if (bad) return `accounts are separated by commas, not spaces ("${bad}")`;
  return { dn, accounts };
}

/**
 * A grid-mapfile that follows its file: on use, at most every `checkMs`, one `stat`; a changed
 * mtime/size/inode re-reads it (one load at a time, shared by concurrent callers, waited for at
 * most `maxWaitMs`). A file that
 * becomes unreadable or does not load keeps the last good map (and says so through `onWarning`).
 */
export class GridMapFile {
  private map: GridMap = { entries: new Map(), warnings: [] };
  private sig = "";
  private checkedAt = 0;
  private loading: Promise<void> | undefined;
  /** Bumped on every successful load (tests, diagnostics). */
  generation = 0;

  constructor(
    readonly path: string,
    private readonly opts: {
      checkMs: number;
      maxWaitMs?: number;
      onLoad?: (m: GridMap) => Promise<void> | void;
      onWarning?: (msg: string) => void;
    },
  ) {}

  /** First load: errors propagate (the boot stops on an unreadable grid-mapfile). */
  async load(): Promise<GridMap> {
    this.checkedAt = Date.now();
    await this.reload(true);
    return this.map;
  }

  async lookup(dn: string): Promise<GridMapEntry | undefined> {
    await this.refreshIfDue();
    return this.map.entries.get(dn);
  }

  current(): GridMap {
    return this.map;
  }

  private async refreshIfDue(): Promise<void> {
    const now = Date.now();
    if (now - this.checkedAt < this.opts.checkMs) return;
    this.checkedAt = now;
    const loading = (this.loading ??= this.reload(false).finally(() => (this.loading = undefined)));
    // A slow reload (huge file, slow NSS for new accounts) finishes in the background; the request
    // waits at most `maxWaitMs` and meanwhile gets the previous map.
    let timer: NodeJS.Timeout | undefined;
    const waited = new Promise<void>((resolve) => (timer = setTimeout(resolve, this.opts.maxWaitMs ?? 2_000)));
    await Promise.race([loading, waited]);
    clearTimeout(timer);
  }

  private async reload(strict: boolean): Promise<void> {
    try {
      const st = await stat(this.path);
      const sig = `${st.mtimeMs}:${st.size}:${st.ino}`;
      if (sig === this.sig) return;
      const next = parseGridMap(await readFile(this.path, "utf8"));
      await this.opts.onLoad?.(next);
      this.map = next;
      this.sig = sig;
      this.generation++;
      for (const w of next.warnings) this.opts.onWarning?.(`${this.path} ${w}`);
    } catch (e) {
      if (strict) throw new Error(`grid-mapfile ${this.path}: ${(e as Error).message}`);
      this.opts.onWarning?.(`grid-mapfile ${this.path} not reloaded, the previous one stays in use: ${(e as Error).message}`);
    }
  }
}
