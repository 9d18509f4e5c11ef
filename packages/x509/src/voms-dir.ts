/**
 * The vomsdir (`/etc/grid-security/vomsdir` layout): `<dir>/<vo>/<host>.lsc` files, each one or
 * more signer chains as DN lines (server subject, then its issuers), chains separated by a line
 * of dashes ("------ NEXT CHAIN ------"), and `<dir>/<vo>/*.pem` certificates (older layout).
 * Read whole at load and reload, like the CA directory; a missing directory is an empty vomsdir.
 */
import { X509Certificate } from "node:crypto";
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { splitPem } from "./pem.js";
import type { VomsTrust } from "./voms-verify.js";

export class VomsDir implements VomsTrust {
  private lscs = new Map<string, string[][]>();
  private certs = new Map<string, X509Certificate[]>();
  warnings: string[] = [];

  constructor(readonly dir?: string) {}

  static async load(dir: string | undefined): Promise<VomsDir> {
    const d = new VomsDir(dir);
    await d.reload();
    return d;
  }

  /** In-memory vomsdir (tests): `{ vo: { "host.lsc": text, "x.pem": pem } }`. */
  static fromFiles(files: Record<string, Record<string, string>>): VomsDir {
    const d = new VomsDir();
    for (const [vo, entries] of Object.entries(files)) for (const [name, text] of Object.entries(entries)) d.add(vo, name, text);
    return d;
  }

  async reload(): Promise<void> {
    if (!this.dir) return;
    const fresh = new VomsDir(this.dir);
    let vos: string[] = [];
    try {
      vos = (await readdir(this.dir, { withFileTypes: true })).filter((e) => e.isDirectory()).map((e) => e.name);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "ENOENT") fresh.warnings.push(`vomsdir ${this.dir}: ${(e as Error).message}`);
    }
    for (const vo of vos) {
      for (const name of await readdir(join(this.dir, vo)).catch(() => [] as string[])) {
        if (!/\.(lsc|pem)$/.test(name)) continue;
        try {
          fresh.add(vo, name, await readFile(join(this.dir, vo, name), "utf8"));
        } catch (e) {
          fresh.warnings.push(`vomsdir ${vo}/${name}: ${(e as Error).message.slice(0, 200)}`);
        }
      }
    }
    this.lscs = fresh.lscs;
    this.certs = fresh.certs;
    this.warnings = fresh.warnings;
  }

  private add(vo: string, name: string, text: string): void {
    if (name.endsWith(".lsc")) {
      this.lscs.set(`${vo}\n${name.slice(0, -4).toLowerCase()}`, parseLsc(text));
    } else {
      const list = this.certs.get(vo) ?? [];
      for (const p of splitPem(text).certificates) list.push(new X509Certificate(p));
      this.certs.set(vo, list);
    }
  }

  lsc(vo: string, host: string): string[][] | undefined {
    return this.lscs.get(`${vo}\n${host.toLowerCase()}`);
  }

  certificates(vo: string): X509Certificate[] {
    return this.certs.get(vo) ?? [];
  }

  get vos(): string[] {
    return [...new Set([...[...this.lscs.keys()].map((k) => k.split("\n")[0]!), ...this.certs.keys()])];
  }
}

/** `.lsc`: DN lines; a line starting with `-` separates alternative chains; `#` comments. */
export function parseLsc(text: string): string[][] {
  const chains: string[][] = [[]];
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.trim();
    if (!line || line.startsWith("#")) continue;
    if (line.startsWith("-")) chains.push([]);
    else chains[chains.length - 1]!.push(line);
  }
  return chains.filter((c) => c.length > 0);
}
