/**
 * A minimal CE REST 1.0 client for benchmarks: HTTPS with an X.509 (proxy) client certificate,
 * keep-alive, no retries. The same requests go to any server implementing the interface (our CE,
 * A-REX), so nothing here knows which one it talks to.
 */
import { readFileSync } from "node:fs";
import { Agent, request, type RequestOptions } from "node:https";
import type { ConnectionOptions } from "node:tls";
import { countGet } from "./count-get.js";

export interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

export interface ClientOptions {
  /** Endpoint URL without `/rest`, e.g. https://localhost:8443/arex. */
  base: string;
  /** PEM file holding the client certificate chain and its key (an RFC 3820 proxy file). */
  credFile: string;
  /** PEM CA certificate(s) the server certificate must chain to. */
  caFile: string;
  /** Connections kept open (one per concurrent request). */
  sockets?: number;
  version?: string;
}

export class RestClient {
  readonly agent: Agent;
  private readonly url: URL;
  private readonly root: string;
  private readonly tls: ConnectionOptions;

  constructor(o: ClientOptions) {
    const pem = readFileSync(o.credFile);
    this.tls = { cert: pem, key: pem, ca: readFileSync(o.caFile), servername: "localhost" };
    this.agent = new Agent({ keepAlive: true, maxSockets: o.sockets ?? 4, ...this.tls });
    this.url = new URL(o.base);
    this.root = `${this.url.pathname.replace(/\/$/, "")}/rest/${o.version ?? "1.0"}`;
  }

  private opts(method: string, path: string, headers: Record<string, string | number>): RequestOptions {
    return {
      host: this.url.hostname,
      port: this.url.port,
      method,
      path: path.startsWith("/") ? path : `${this.root}/${path}`,
      agent: this.agent,
      headers,
      servername: "localhost",
    };
  }

  call(method: string, path: string, body?: string | Buffer, headers: Record<string, string | number> = {}): Promise<Reply> {
    const h = { accept: "application/json", ...(body !== undefined ? { "content-length": Buffer.byteLength(body) } : {}), ...headers };
    return new Promise((resolve, reject) => {
      const req = request(this.opts(method, path, h), (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (d: Buffer) => chunks.push(d));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
        res.on("error", reject);
      });
      req.on("error", reject);
      req.end(body);
    });
  }

  /** JSON reply; throws unless the status is in `ok`. */
  async json<T = unknown>(method: string, path: string, body?: unknown, ok = [200, 201]): Promise<T> {
    const r = await this.call(
      method,
      path,
      body === undefined ? undefined : JSON.stringify(body),
      body === undefined ? {} : { "content-type": "application/json" },
    );
    if (!ok.includes(r.status)) throw new Error(`${method} ${path}: ${r.status} ${r.body.toString("utf8").slice(0, 300)}`);
    return JSON.parse(r.body.toString("utf8")) as T;
  }

  /** PUT of `size` bytes made of `chunk` repeated, one stream with Content-Length; honours back-pressure. */
  putStream(path: string, size: number, chunk: Buffer): Promise<Reply> {
    return new Promise((resolve, reject) => {
      const req = request(this.opts("PUT", path, { "content-type": "application/octet-stream", "content-length": size }), (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (d: Buffer) => chunks.push(d));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
      });
      req.on("error", reject);
      let sent = 0;
      const pump = () => {
        while (sent < size) {
          const n = Math.min(chunk.length, size - sent);
          sent += n;
          if (!req.write(n === chunk.length ? chunk : chunk.subarray(0, n))) {
            req.once("drain", pump);
            return;
          }
        }
        req.end();
      };
      pump();
    });
  }

  /** GET of a (large) body, counted and dropped: its own connection, read into one buffer (count-get.ts). */
  getCount(path: string): Promise<{ status: number; bytes: number }> {
    const o = this.opts("GET", path, {});
    return countGet(this.url.hostname, Number(this.url.port || 443), o.path!, this.tls);
  }

  close(): void {
    this.agent.destroy();
  }
}

/** REST 1.0 renders a one-element list as an object; this gives the list either way. */
export function items<T>(v: T | T[] | undefined): T[] {
  return v === undefined ? [] : Array.isArray(v) ? v : [v];
}

export interface JobItem {
  "status-code"?: string;
  reason?: string;
  id?: string;
  state?: string;
}

/** Multi-job xRSL (`+(&...)(&...)`) of `n` jobs. */
export function xrslBatch(n: number, one: (i: number) => string): string {
  return n === 1 ? one(0) : `+${Array.from({ length: n }, (_, i) => `(${one(i)})`).join("")}`;
}

/** Submits one request of xRSL jobs; returns the ids created (201 items) and the refused count. */
export async function submit(c: RestClient, xrsl: string): Promise<{ ids: string[]; refused: JobItem[] }> {
  const r = await c.call("POST", "jobs?action=new", xrsl, { "content-type": "application/rsl" });
  if (r.status !== 201 && r.status !== 200) throw new Error(`submission: ${r.status} ${r.body.toString("utf8").slice(0, 300)}`);
  const all = items((JSON.parse(r.body.toString("utf8")) as { job?: JobItem | JobItem[] }).job);
  return {
    ids: all.filter((j) => j["status-code"] === "201" && j.id).map((j) => j.id!),
    refused: all.filter((j) => j["status-code"] !== "201"),
  };
}

export const statusJson = (ids: string[]) => JSON.stringify({ job: ids.map((id) => ({ id })) });
export const statusXml = (ids: string[]) => `<jobs>${ids.map((id) => `<job><id>${id}</id></job>`).join("")}</jobs>`;

/** Bulk status (JSON): id → state. */
export async function states(c: RestClient, ids: string[]): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (let i = 0; i < ids.length; i += 500) {
    const r = await c.json<{ job?: JobItem | JobItem[] }>("POST", "jobs?action=status", {
      job: ids.slice(i, i + 500).map((id) => ({ id })),
    });
    for (const j of items(r.job)) if (j.id) out.set(j.id, j.state ?? `status-${j["status-code"]}`);
  }
  return out;
}

export const TERMINAL = new Set(["FINISHED", "FAILED", "KILLED", "WIPED"]);
