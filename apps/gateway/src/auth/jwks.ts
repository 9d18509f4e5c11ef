/**
 * Signing keys of trusted token issuers (WLCG JWT profile): discovered through
 * `<issuer>/.well-known/openid-configuration` over HTTPS with hostname verification, cached for
 * `jwksCacheSeconds`, refreshed early when a token names an unknown `kid` (rate limited, so a flood
 * of made-up kids cannot turn the gateway into a request amplifier against the issuer).
 *
 * Own cache instead of jose's createRemoteJWKSet: we need a per-issuer CA bundle, `kid` lookups
 * that tell "unknown kid" apart from "no keys", and keys that survive an issuer outage.
 */
import { Failure } from "@ce/model";
import { readFileSync } from "node:fs";
import { request } from "node:https";
import { rootCertificates } from "node:tls";
import { importJWK, type JWK } from "jose";

export type SigningAlg = "RS256" | "ES256" | "EdDSA";

export interface IssuerConfig {
  issuer: string;
  jwksUri?: string | undefined;
  caFile?: string | undefined;
}

export interface JwksOptions {
  cacheSeconds: number;
  /** Minimum spacing of refreshes triggered by unknown kids (default 30 s). */
  minRefreshSeconds?: number;
  /** HTTP timeout per request (default 5 s). */
  timeoutMs?: number;
  now?: () => number;
}

/** The issuer's keys could not be obtained at all (network, TLS, bad document). Not the caller's fault. */
export class JwksUnavailable extends Failure<"JWKS_UNAVAILABLE"> {
  constructor(message: string) {
    super("JWKS_UNAVAILABLE", message);
  }
}

type ImportedKey = Awaited<ReturnType<typeof importJWK>>;

interface Entry {
  jwks: JWK[];
  fetchedAt: number;
  /** Imported keys per `kid|alg`, built lazily. */
  imported: Map<string, ImportedKey>;
}

const MAX_DOC_BYTES = 256 * 1024;

export class JwksCache {
  private readonly entries = new Map<string, Entry>();
  private readonly inflight = new Map<string, Promise<Entry>>();
  private readonly lastAttempt = new Map<string, number>();
  private readonly lastFailure = new Map<string, string>();
  private readonly cas = new Map<string, string[] | undefined>();
  private readonly now: () => number;

  constructor(
    private readonly issuers: readonly IssuerConfig[],
    private readonly opts: JwksOptions,
  ) {
    this.now = opts.now ?? Date.now;
  }

  issuerConfig(iss: string): IssuerConfig | undefined {
    return this.issuers.find((i) => i.issuer === iss);
  }

  /**
   * The key with this `kid` usable for `alg`, or undefined when the issuer does not publish one
   * (after at most one rate-limited refresh). Throws JwksUnavailable when no key set can be had.
   */
  async key(iss: string, kid: string, alg: SigningAlg): Promise<ImportedKey | undefined> {
    const cfg = this.issuerConfig(iss);
    if (!cfg) return undefined;
    let entry = this.entries.get(iss);
    const ttl = this.opts.cacheSeconds * 1000;
    // While the issuer is unreachable, stale keys are served and retries are spaced (no 5 s
    // timeout on every request); without any keys the last failure is repeated for that spacing.
    if (!entry) {
      const failed = this.lastFailure.get(iss);
      if (failed && !this.mayRefresh(iss)) throw new JwksUnavailable(failed);
      entry = await this.refresh(cfg, undefined);
    } else if (this.now() - entry.fetchedAt >= ttl && this.mayRefresh(iss)) {
      entry = await this.refresh(cfg, entry);
    }
    let jwk = pick(entry.jwks, kid);
    if (!jwk && this.mayRefresh(iss)) {
      entry = await this.refresh(cfg, entry);
      jwk = pick(entry.jwks, kid);
    }
    if (!jwk) return undefined;
    if (jwk.alg !== undefined && jwk.alg !== alg) return undefined; // key pinned to another algorithm
    if (jwk.use !== undefined && jwk.use !== "sig") return undefined;
    const cacheKey = `${kid}|${alg}`;
    let k = entry.imported.get(cacheKey);
    if (!k) {
      try {
        k = await importJWK({ ...jwk, alg }, alg);
      } catch {
        return undefined; // key type does not fit the algorithm (e.g. an RSA key for ES256)
      }
      entry.imported.set(cacheKey, k);
    }
    return k;
  }

  private mayRefresh(iss: string): boolean {
    const last = this.lastAttempt.get(iss) ?? 0;
    return this.now() - last >= (this.opts.minRefreshSeconds ?? 30) * 1000;
  }

  /** One fetch per issuer at a time; a failed refresh keeps serving the stale keys. */
  private async refresh(cfg: IssuerConfig, stale: Entry | undefined): Promise<Entry> {
    let p = this.inflight.get(cfg.issuer);
    if (!p) {
      this.lastAttempt.set(cfg.issuer, this.now());
      p = this.fetchEntry(cfg).finally(() => this.inflight.delete(cfg.issuer));
      this.inflight.set(cfg.issuer, p);
    }
    try {
      const e = await p;
      this.entries.set(cfg.issuer, e);
      this.lastFailure.delete(cfg.issuer);
      return e;
    } catch (err) {
      const e = err instanceof JwksUnavailable ? err : new JwksUnavailable(String((err as Error).message));
      this.lastFailure.set(cfg.issuer, e.message);
      if (stale) return stale;
      throw e;
    }
  }

  private async fetchEntry(cfg: IssuerConfig): Promise<Entry> {
    let jwksUri = cfg.jwksUri;
    if (!jwksUri) {
      const disc = await this.getJson(cfg, `${cfg.issuer.replace(/\/+$/, "")}/.well-known/openid-configuration`);
      // OpenID Connect Discovery §4.3: the document must name exactly the issuer we asked about.
      if (disc.issuer !== cfg.issuer) throw new JwksUnavailable(`discovery document of ${cfg.issuer} names issuer ${String(disc.issuer)}`);
      if (typeof disc.jwks_uri !== "string") throw new JwksUnavailable(`discovery document of ${cfg.issuer} has no jwks_uri`);
      jwksUri = disc.jwks_uri;
    }
    const set = await this.getJson(cfg, jwksUri);
    if (!Array.isArray(set.keys)) throw new JwksUnavailable(`JWKS of ${cfg.issuer} has no keys array`);
    const jwks = (set.keys as unknown[]).filter((k): k is JWK => !!k && typeof k === "object" && typeof (k as JWK).kty === "string");
    return { jwks, fetchedAt: this.now(), imported: new Map() };
  }

  private ca(cfg: IssuerConfig): string[] | undefined {
    if (!cfg.caFile) return undefined;
    if (!this.cas.has(cfg.issuer)) {
      let pem: string;
      try {
        pem = readFileSync(cfg.caFile, "utf8");
      } catch (e) {
        throw new JwksUnavailable(`cannot read caFile of ${cfg.issuer}: ${(e as Error).message}`);
      }
      this.cas.set(cfg.issuer, [...rootCertificates, pem]);
    }
    return this.cas.get(cfg.issuer);
  }

  private getJson(cfg: IssuerConfig, url: string): Promise<Record<string, unknown>> {
    const u = new URL(url);
    if (u.protocol !== "https:") return Promise.reject(new JwksUnavailable(`refusing non-HTTPS key URL ${url}`));
    const ca = this.ca(cfg);
    return new Promise((resolve, reject) => {
      const req = request(
        u,
        { method: "GET", headers: { accept: "application/json" }, timeout: this.opts.timeoutMs ?? 5000, ...(ca ? { ca } : {}) },
        (res) => {
          if (res.statusCode !== 200) {
            res.resume();
            reject(new JwksUnavailable(`GET ${url}: HTTP ${res.statusCode}`));
            return;
          }
          const chunks: Buffer[] = [];
          let size = 0;
          res.on("data", (b: Buffer) => {
            size += b.length;
            if (size > MAX_DOC_BYTES) req.destroy(new JwksUnavailable(`GET ${url}: document too large`));
            else chunks.push(b);
          });
          res.on("end", () => {
            try {
              const v: unknown = JSON.parse(Buffer.concat(chunks).toString("utf8"));
              if (!v || typeof v !== "object" || Array.isArray(v)) throw new Error("not a JSON object");
              resolve(v as Record<string, unknown>);
            } catch (e) {
              reject(new JwksUnavailable(`GET ${url}: ${(e as Error).message}`));
            }
          });
          res.on("error", reject);
        },
      );
      req.on("timeout", () => req.destroy(new JwksUnavailable(`GET ${url}: timeout`)));
      req.on("error", (e) => reject(e instanceof JwksUnavailable ? e : new JwksUnavailable(`GET ${url}: ${e.message}`)));
      req.end();
    });
  }
}

function pick(keys: readonly JWK[], kid: string): JWK | undefined {
  return keys.find((k) => k.kid === kid);
}
