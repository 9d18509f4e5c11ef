import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";

/**
 * AES-256-GCM for secrets at rest in Redis (delegated private keys, tokens).
 * Format: base64(iv[12] | tag[16] | ciphertext). Never log the plaintext.
 */
export class SecretBox {
  private readonly key: Buffer;

  constructor(keyBase64: string) {
    this.key = Buffer.from(keyBase64, "base64");
    if (this.key.length !== 32) throw new Error("delegation encryption key must be 32 bytes (base64)");
  }

  static generateKey(): string {
    return randomBytes(32).toString("base64");
  }

  seal(plain: string, aad = ""): string {
    const iv = randomBytes(12);
    const c = createCipheriv("aes-256-gcm", this.key, iv);
    c.setAAD(Buffer.from(aad));
    const body = Buffer.concat([c.update(plain, "utf8"), c.final()]);
    return Buffer.concat([iv, c.getAuthTag(), body]).toString("base64");
  }

  open(sealed: string, aad = ""): string {
    const buf = Buffer.from(sealed, "base64");
    const d = createDecipheriv("aes-256-gcm", this.key, buf.subarray(0, 12));
    d.setAAD(Buffer.from(aad));
    d.setAuthTag(buf.subarray(12, 28));
    return Buffer.concat([d.update(buf.subarray(28)), d.final()]).toString("utf8");
  }
}

/** What `loadSecretBox` reads: `delegations.encryptionKey[File]` and `paths.stateDir` of the config. */
export interface SecretBoxConfig {
  delegations: { encryptionKey?: string | undefined; encryptionKeyFile?: string | undefined };
  paths: { stateDir: string };
}

/**
 * The one loader of the delegation encryption key (gateway and JEM): `delegations.encryptionKey`,
 * else `delegations.encryptionKeyFile` (must exist), else the development key `<stateDir>/delegation.key`,
 * created on first use with an exclusive create so racing gateways and JEMs end up with the same key.
 * `onGenerated` is told when this process created that development key (the gateway logs it).
 * A key that is not 32 bytes of base64 is refused with the place it came from.
 */
export function loadSecretBox(config: SecretBoxConfig, onGenerated?: (file: string) => void): SecretBox {
  const { encryptionKey, encryptionKeyFile } = config.delegations;
  if (encryptionKey) return boxFrom(encryptionKey, "delegations.encryptionKey");
  const file = encryptionKeyFile ?? join(config.paths.stateDir, "delegation.key");
  // Read first (no exists-then-read race); only a missing development key is created.
  try {
    return boxFrom(readFileSync(file, "utf8").trim(), file);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e;
    if (encryptionKeyFile) throw new Error(`delegations.encryptionKeyFile ${file} does not exist`);
  }
  mkdirSync(dirname(file), { recursive: true });
  try {
    writeFileSync(file, SecretBox.generateKey() + "\n", { mode: 0o600, flag: "wx" });
    onGenerated?.(file);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
  }
  return boxFrom(readFileSync(file, "utf8").trim(), file);
}

function boxFrom(key: string, source: string): SecretBox {
  try {
    return new SecretBox(key);
  } catch (e) {
    throw new Error(`${source}: ${(e as Error).message}`);
  }
}
