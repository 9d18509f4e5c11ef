import { Failure } from "@ce/model";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { Agent, fetch, type Response } from "undici";

export class PublishError extends Failure<"ACCT_PUBLISH"> {
  constructor(
    message: string,
    readonly status?: number,
  ) {
    super("ACCT_PUBLISH", message);
  }
}

export class ArgoAuthnError extends Failure<"ACCT_ARGO_AUTHN"> {
  constructor(
    message: string,
    readonly status?: number,
  ) {
    super("ACCT_ARGO_AUTHN", message);
  }
}

export interface ArgoTarget {
  targetUrl: string;
  project: string;
  topic: string;
  /** A configured API key, sent as `x-api-key`. */
  token?: string | undefined;
  /**
   * Without a configured key: ARGO's authentication service, which maps the host certificate
   * (presented as the TLS client certificate) to the host's AMS key.
   */
  authn?: { url: string; certFile: string; keyFile: string } | undefined;
  /** PEM bundle, or an OpenSSL hashed CA directory (every PEM file in it). */
  ca: { file?: string | undefined; dir?: string | undefined };
}

/**
 * Where ARGO's own client library asks for the key of an AMS host: the authentication service on
 * port 8443 of that host, `/v1/service-types/ams/hosts/<AMS host>:authx509`.
 */
export function defaultAuthnUrl(targetUrl: string): string {
  const host = new URL(targetUrl).hostname;
  return `https://${host.includes(":") ? `[${host}]` : host}:8443/v1/service-types/ams/hosts/${encodeURIComponent(host)}:authx509`;
}

/** Keys from the authentication service, per service URL and certificate, for the life of the process. */
const authnKeys = new Map<string, string>();

function caPems(ca: ArgoTarget["ca"]): string[] | undefined {
  if (ca.file) return [readFileSync(ca.file, "utf8")];
  if (!ca.dir) return undefined;
  const out: string[] = [];
  for (const f of readdirSync(ca.dir)) {
    if (!/\.(\d+|pem)$/.test(f)) continue;
    try {
      const t = readFileSync(join(ca.dir, f), "utf8");
      if (t.includes("-----BEGIN CERTIFICATE-----")) out.push(t);
    } catch {
      // An unreadable entry is not a CA; the TLS check fails if the right one is missing.
    }
  }
  return out;
}

/**
 * ARGO Messaging Service publishing (`POST <targetUrl>/v1/projects/<project>/topics/<topic>:publish`,
 * JSON `messages` with base64 `data`): one AMS message per APEL message, as A-REX sends them.
 * Returns the message ids the service gave.
 */
export class ArgoPublisher {
  private readonly agent: Agent;
  private readonly ca: string[] | undefined;
  private authnAgent: Agent | undefined;
  constructor(private readonly t: ArgoTarget) {
    this.ca = caPems(t.ca);
    this.agent = new Agent({ connect: this.ca ? { ca: this.ca } : {} });
  }

  /** The key to send: the configured one, else the authentication service's (cached; `fresh` asks again). */
  private async key(fresh: boolean): Promise<string | undefined> {
    if (this.t.token || !this.t.authn) return this.t.token;
    const cacheKey = `${this.t.authn.url}|${this.t.authn.certFile}`;
    if (!fresh && authnKeys.has(cacheKey)) return authnKeys.get(cacheKey);
    authnKeys.delete(cacheKey);
    const { url, certFile, keyFile } = this.t.authn;
    if (!this.authnAgent) {
      let cert: Buffer, key: Buffer;
      try {
        [cert, key] = [readFileSync(certFile), readFileSync(keyFile)];
      } catch (e) {
        throw new ArgoAuthnError(`host certificate for the ARGO authentication service unreadable: ${(e as Error).message}`);
      }
      this.authnAgent = new Agent({ connect: { ...(this.ca ? { ca: this.ca } : {}), cert, key } });
    }
    let res: Response;
    try {
      res = await fetch(url, { headers: { accept: "application/json" }, dispatcher: this.authnAgent, signal: AbortSignal.timeout(30_000) });
    } catch (e) {
      throw new ArgoAuthnError(`ARGO authentication service ${url} unreachable: ${reason(e)}`);
    }
    const text = await res.text();
    if (!res.ok)
      throw new ArgoAuthnError(
        `ARGO authentication service refused the host certificate ${certFile}: HTTP ${res.status} ${text.slice(0, 300)}`,
        res.status,
      );
    let token: unknown;
    try {
      token = (JSON.parse(text) as { token?: unknown }).token;
    } catch {
      token = undefined;
    }
    if (typeof token !== "string" || token === "")
      throw new ArgoAuthnError(`ARGO authentication service ${url} answered without a token: ${text.slice(0, 300)}`);
    authnKeys.set(cacheKey, token);
    return token;
  }

  async publish(messages: readonly { data: string; empaid: string }[]): Promise<string[]> {
    const url = `${this.t.targetUrl.replace(/\/+$/, "")}/v1/projects/${encodeURIComponent(this.t.project)}/topics/${encodeURIComponent(this.t.topic)}:publish`;
    const body = JSON.stringify({
      messages: messages.map((m) => ({ attributes: { empaid: m.empaid }, data: Buffer.from(m.data, "utf8").toString("base64") })),
    });
    let res = await this.post(url, body, await this.key(false));
    // A key from the authentication service can be revoked or rotated: ask for a new one, once.
    if (res.status === 401 && !this.t.token && this.t.authn) {
      await res.text();
      res = await this.post(url, body, await this.key(true));
    }
    const text = await res.text();
    if (!res.ok) throw new PublishError(`ARGO publish refused: HTTP ${res.status} ${text.slice(0, 300)}`, res.status);
    let ids: unknown;
    try {
      ids = (JSON.parse(text) as { messageIds?: unknown }).messageIds;
    } catch {
      ids = undefined;
    }
    if (!Array.isArray(ids) || ids.length !== messages.length)
      throw new PublishError(`ARGO publish answer without one message id per message: ${text.slice(0, 300)}`);
    return ids.map(String);
  }

  private async post(url: string, body: string, key: string | undefined): Promise<Response> {
    try {
      return await fetch(url, {
        method: "POST",
        headers: { "content-type": "application/json", ...(key ? { "x-api-key": key } : {}) },
        body,
        dispatcher: this.agent,
        signal: AbortSignal.timeout(30_000),
      });
    } catch (e) {
      throw new PublishError(`ARGO endpoint ${this.t.targetUrl} unreachable: ${reason(e)}`);
    }
  }

  async close(): Promise<void> {
    await this.agent.close();
    await this.authnAgent?.close();
  }
}

const reason = (e: unknown) =>
  `${(e as Error).message}${(e as { cause?: Error }).cause ? ` (${(e as { cause?: Error }).cause!.message})` : ""}`;
