import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { Agent, fetch, type Response } from "undici";

export class PublishError extends Error {
  readonly code = "ACCT_PUBLISH";
  constructor(message: string, readonly status?: number) {
    super(message);
  }
}

export interface ArgoTarget {
  targetUrl: string;
  project: string;
  topic: string;
  /** API key, sent as `x-api-key`. */
  token?: string | undefined;
  /** PEM bundle, or an OpenSSL hashed CA directory (every PEM file in it). */
  ca: { file?: string | undefined; dir?: string | undefined };
}

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
  constructor(private readonly t: ArgoTarget) {
    const ca = caPems(t.ca);
    this.agent = new Agent({ connect: ca ? { ca } : {} });
  }

  async publish(messages: readonly { data: string; empaid: string }[]): Promise<string[]> {
    const url = `${this.t.targetUrl.replace(/\/+$/, "")}/v1/projects/${encodeURIComponent(this.t.project)}/topics/${encodeURIComponent(this.t.topic)}:publish`;
    const body = JSON.stringify({ messages: messages.map((m) => ({ attributes: { empaid: m.empaid }, data: Buffer.from(m.data, "utf8").toString("base64") })) });
    let res: Response;
    try {
      res = await fetch(url, {
        method: "POST",
        headers: { "content-type": "application/json", ...(this.t.token ? { "x-api-key": this.t.token } : {}) },
        body,
        dispatcher: this.agent,
        signal: AbortSignal.timeout(30_000),
      });
    } catch (e) {
      throw new PublishError(`ARGO endpoint ${this.t.targetUrl} unreachable: ${(e as Error).message}${(e as { cause?: Error }).cause ? ` (${(e as { cause?: Error }).cause!.message})` : ""}`);
    }
    const text = await res.text();
    if (!res.ok) throw new PublishError(`ARGO publish refused: HTTP ${res.status} ${text.slice(0, 300)}`, res.status);
    let ids: unknown;
    try {
      ids = (JSON.parse(text) as { messageIds?: unknown }).messageIds;
    } catch {
      ids = undefined;
    }
    if (!Array.isArray(ids) || ids.length !== messages.length) throw new PublishError(`ARGO publish answer without one message id per message: ${text.slice(0, 300)}`);
    return ids.map(String);
  }

  async close(): Promise<void> {
    await this.agent.close();
  }
}
