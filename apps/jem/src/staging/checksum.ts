import { createHash, type Hash } from "node:crypto";

/** Streaming checksum with a `digest()` in the textual form storage systems publish. */
export interface Checksummer {
  update(chunk: Buffer): void;
  digest(): string;
}

/** Adler-32 (the grid default for dCache/EOS), hex, 8 digits. */
class Adler32 implements Checksummer {
  private a = 1;
  private b = 0;
  update(chunk: Buffer): void {
    let { a, b } = this;
    // 5552 is the largest n with 255n(n+1)/2 + (n+1)(65520) < 2^32: reduce once per block.
    for (let i = 0; i < chunk.length;) {
      const end = Math.min(i + 5552, chunk.length);
      for (; i < end; i++) {
        a += chunk[i]!;
        b += a;
      }
      a %= 65521;
      b %= 65521;
    }
    this.a = a;
    this.b = b;
  }
  digest(): string {
    return (((this.b << 16) | this.a) >>> 0).toString(16).padStart(8, "0");
  }
}

class NodeHash implements Checksummer {
  private readonly h: Hash;
  constructor(alg: string) {
    this.h = createHash(alg);
  }
  update(chunk: Buffer): void {
    this.h.update(chunk);
  }
  digest(): string {
    return this.h.digest("hex");
  }
}

export const CHECKSUM_ALGORITHMS = ["adler32", "md5", "sha256"] as const;

/** Parses `alg:value` (or a bare `alg` = compute only). Unknown algorithms → undefined. */
export function parseChecksum(spec: string | undefined): { alg: (typeof CHECKSUM_ALGORITHMS)[number]; expected?: string } | undefined {
  if (!spec) return undefined;
  const [alg, value] = spec.toLowerCase().split(":", 2);
  if (!(CHECKSUM_ALGORITHMS as readonly string[]).includes(alg ?? "")) return undefined;
  return value ? { alg: alg as "md5", expected: value } : { alg: alg as "md5" };
}

export function checksummer(alg: (typeof CHECKSUM_ALGORITHMS)[number]): Checksummer {
  return alg === "adler32" ? new Adler32() : new NodeHash(alg);
}

/** Compares hex digests leniently (adler32 is often published without leading zeros). */
export function sameDigest(a: string, b: string): boolean {
  const n = (s: string) => s.toLowerCase().replace(/^0+/, "");
  return n(a) === n(b);
}
