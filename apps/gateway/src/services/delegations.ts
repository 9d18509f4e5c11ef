/**
 * Delegations E8/E9: X.509 two-step (CSR → signed chain), JWT (1.1, stored unverified), renew,
 * get, delete, list. The route layer maps HTTP; everything here is owner-scoped, so another user's
 * delegation is indistinguishable from a missing one (404).
 *
 * Better than the reference: the PUT chain is verified (our key, trusted CA, caller's own identity,
 * validity); renew issues a NEW key while the current proxy keeps serving jobs until the PUT; a JWT
 * renew replaces the token instead of overwriting it with a private key.
 */
import { createPrivateKey } from "node:crypto";
import { decodeJwt } from "jose";
import { DelegationQuotaReached, takeFromMinuteWindow, type DelegationRecord, type DelegationStore, type DelegationType } from "@ce/store";
import { acceptDelegatedChain, createCsr, type KeyPair, type KeyPool, type TrustStore } from "@ce/x509";
import type { ApiVersion, Identity } from "../context.js";
import { BadRequest, CeError, Forbidden, NotFound } from "../errors.js";

export interface DelegationDeps {
  store: DelegationStore;
  keyPool: KeyPool;
  trust: TrustStore;
  now?: () => Date;
  /** Delegations one owner may hold (each new x509 slot costs an RSA key); quotas.delegationsPerOwner. */
  maxPerOwner?: number;
  /** Renewals per owner per minute; quotas.delegationRenewalsPerMinute. */
  renewalsPerMinute?: number;
  /** RSA keys generated at once when the pool is empty (libuv's pool also serves fs/DNS). Default 2. */
  keyConcurrency?: number;
}

export class DelegationService {
  private keyJobs = 0;
  private readonly keyWaiters: (() => void)[] = [];

  constructor(private readonly d: DelegationDeps) {}

  /** A pool key; when the pool is dry, on-demand generation is queued instead of run unbounded. */
  private async takeKey(): Promise<KeyPair> {
    if (this.d.keyPool.available > 0) return this.d.keyPool.take();
    while (this.keyJobs >= (this.d.keyConcurrency ?? 2)) await new Promise<void>((r) => this.keyWaiters.push(r));
    this.keyJobs++;
    try {
      return await this.d.keyPool.take();
    } finally {
      this.keyJobs--;
      this.keyWaiters.shift()?.();
    }
  }

  /** Creates the slot within the owner's quota (checked atomically in Redis by the store). */
  private async createWithin(owner: string, type: DelegationType, secret: Parameters<DelegationStore["create"]>[2]): Promise<string> {
    const max = this.d.maxPerOwner ?? 10_000;
    try {
      return await this.d.store.create(owner, type, secret, undefined, max);
    } catch (e) {
      throw e instanceof DelegationQuotaReached ? quotaReached(max) : e;
    }
  }

  /** Counts a renewal against the owner's per-minute quota; 429 with Retry-After above it. */
  private async takeRenewal(owner: string): Promise<void> {
    const max = this.d.renewalsPerMinute ?? 120;
    const wait = await takeFromMinuteWindow(this.d.store.redis, this.d.store.keys.prefix, owner, max, this.d.now?.().getTime());
    if (wait !== undefined) {
      throw new CeError(
        429,
        "DELEGATION_RENEWAL_RATE",
        `Too many delegation renewals: the limit is ${max} per minute per identity (quota quotas.delegationRenewalsPerMinute); retry after ${wait} s`,
        { "Retry-After": String(wait) },
      );
    }
  }

  /** The caller's delegation as seen under `version` (1.0 knows only x509 delegations). */
  async find(owner: string, id: string, version: ApiVersion): Promise<DelegationRecord> {
    const rec = isDelegationId(id) ? await this.d.store.get(id, owner) : undefined;
    if (!rec || (version === "1.0" && rec.type !== "x509")) throw new NotFound("No such delegation", "DELEGATION_NOT_FOUND");
    return rec;
  }

  async list(owner: string, version: ApiVersion, type: DelegationType | undefined): Promise<DelegationRecord[]> {
    return this.d.store.list(owner, version === "1.0" ? "x509" : type);
  }

  /** Step 1 of the X.509 exchange: a pool key, sealed in the store; the CSR for it. */
  async newX509(owner: string): Promise<{ id: string; csr: string }> {
    // Refused before a key is spent on it; the atomic check follows in createWithin.
    const max = this.d.maxPerOwner ?? 10_000;
    if ((await this.d.store.count(owner)) >= max) throw quotaReached(max);
    const kp = await this.takeKey();
    const id = await this.createWithin(owner, "x509", { privateKeyPem: pkcs8(kp.privateKey) });
    return { id, csr: createCsr(kp) };
  }

  /** X.509 renewal: a fresh key and CSR; the stored proxy stays in use until the PUT. */
  async renewX509(owner: string, id: string, version: ApiVersion): Promise<string> {
    const rec = await this.find(owner, id, version);
    if (rec.type !== "x509")
      throw new BadRequest(
        "Delegation is a jwt delegation: renew it with the new token in an X-Token-Delegation header",
        "DELEGATION_TYPE",
      );
    await this.takeRenewal(owner);
    const kp = await this.takeKey();
    await this.d.store.replaceKey(id, owner, pkcs8(kp.privateKey));
    return createCsr(kp);
  }

  /**
   * Step 2: the signed chain. It must carry this slot's public key, chain to a trusted CA and
   * belong to the caller (an X.509 caller's own end-entity DN; a token caller has no DN, and
   * signing the CSR already proves possession of the proxy's key).
   */
  async acceptCertificate(caller: Identity, id: string, version: ApiVersion, body: string): Promise<{ expires: number; identity: string }> {
    const owner = caller.subject;
    const rec = await this.find(owner, id, version);
    if (rec.type !== "x509") throw new BadRequest("Delegation is a jwt delegation; it takes no certificate", "DELEGATION_TYPE");
    if (body.trim() === "") throw new BadRequest("Missing payload: the signed delegation certificate chain (PEM)", "DELEGATION_EMPTY");
    const keyPem = await this.d.store.privateKey(id, owner);
    if (!keyPem)
      throw new BadRequest("No certificate request is pending for this delegation: start with action=renew", "DELEGATION_NOT_PENDING");
    const now = this.d.now?.();
    const res = acceptDelegatedChain(
      body,
      createPrivateKey(keyPem),
      this.d.trust,
      caller.kind === "x509" ? caller.subject : undefined,
      now ? { now } : {},
    );
    if (!res.ok)
      throw new BadRequest(
        `Failed accepting delegation (${res.code.toLowerCase().replace(/_/g, " ")}): ${res.reason}`,
        `DELEGATION_${res.code}`,
      );
    const expires = res.notAfter.getTime();
    await this.d.store.storeProxy(id, owner, res.proxyPem, expires, publicPart(res.proxyPem));
    return { expires, identity: res.identity };
  }

  /** JWT delegation (1.1): stored sealed and unverified, as the interface says; exp recorded when readable. */
  async newJwt(owner: string, header: string | undefined): Promise<string> {
    const token = delegatedToken(header);
    return this.createWithin(owner, "jwt", { token, expires: jwtExpiry(token) });
  }

  async renewJwt(owner: string, id: string, header: string | undefined): Promise<void> {
    const rec = await this.find(owner, id, "1.1");
    if (rec.type !== "jwt") throw new BadRequest("Delegation is an x509 delegation; X-Token-Delegation does not apply", "DELEGATION_TYPE");
    const token = delegatedToken(header);
    await this.takeRenewal(owner);
    await this.d.store.storeToken(id, owner, token, jwtExpiry(token));
  }

  /** x509: the public chain of the stored proxy (never the key); empty while none is stored. */
  async publicChain(owner: string, id: string): Promise<string> {
    return (await this.d.store.publicPart(id, owner)) ?? "";
  }

  /**
   * jwt: the stored token itself. The route gives it only to a caller that could have delegated
   * it (decisions #36); never logged.
   */
  async token(owner: string, id: string): Promise<string> {
    const cred = await this.d.store.credential(owner, id);
    if (cred?.type !== "jwt") throw new NotFound("No such delegation", "DELEGATION_NOT_FOUND");
    return cred.token;
  }

  async delete(owner: string, id: string, version: ApiVersion): Promise<void> {
    await this.find(owner, id, version);
    if (!(await this.d.store.delete(id, owner))) throw new NotFound("No such delegation", "DELEGATION_NOT_FOUND");
  }
}

function quotaReached(max: number): Forbidden {
  return new Forbidden(
    `Too many delegations: the limit is ${max} per identity (quota quotas.delegationsPerOwner); delete unused ones`,
    "DELEGATION_QUOTA",
  );
}

/** Ids are ours (16 hex); anything else cannot exist, so it is not looked up. */
export function isDelegationId(id: string): boolean {
  return /^[0-9a-f]{6,64}$/.test(id);
}

function pkcs8(key: import("node:crypto").KeyObject): string {
  return key.export({ type: "pkcs8", format: "pem" }) as string;
}

/** The stored proxy minus every private-key block: what `action=get` returns. */
export function publicPart(proxyPem: string): string {
  return proxyPem.replace(/-----BEGIN ([A-Z ]*)PRIVATE KEY-----[\s\S]*?-----END \1PRIVATE KEY-----\r?\n?/g, "");
}

/**
 * The delegated token from `X-Token-Delegation` / `X-Delegation` (decisions #7): with or without
 * a `Bearer ` prefix (any case), stored bare.
 */
export function delegatedToken(header: string | undefined): string {
  const token = (header ?? "")
    .trim()
    .replace(/^bearer\s+/i, "")
    .trim();
  if (token === "") throw new BadRequest("Missing X-Token-Delegation header (the token to delegate)", "DELEGATION_TOKEN_MISSING");
  if (/[\s\x00-\x1f\x7f]/.test(token) || token.length > 64 * 1024)
    throw new BadRequest("X-Token-Delegation does not hold a single token", "DELEGATION_TOKEN_MALFORMED");
  return token;
}

/** `exp` of a JWT in ms, read without verification (only to expire the record); undefined otherwise. */
export function jwtExpiry(token: string): number | undefined {
  try {
    const exp = decodeJwt(token).exp;
    return typeof exp === "number" && Number.isFinite(exp) ? exp * 1000 : undefined;
  } catch {
    return undefined;
  }
}
