import { readFileSync } from "node:fs";
import { Agent, request } from "node:https";
import { join } from "node:path";
import { signCsrAsProxy } from "@ce/x509/testing";
import type { Stack } from "@ce/testing/stack";

/**
 * A small REST 1.1 client over HTTPS with the stack's user certificate (keep-alive, several
 * requests in flight): what the HA tests and the durability bench drive the CE with.
 */
export interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

export interface JobItem {
  id?: string;
  "status-code"?: string;
  reason?: string;
  state?: string;
  delegation_id?: string | string[];
}

export class CeClient {
  private readonly agent: Agent;
  readonly api: string;

  constructor(stack: Pick<Stack, "pki">, url: string, maxSockets = 16) {
    const pki = stack.pki;
    this.agent = new Agent({
      keepAlive: true,
      maxSockets,
      cert: readFileSync(join(pki, "user", "cert.pem")),
      key: readFileSync(join(pki, "user", "key.pem")),
      ca: readFileSync(join(pki, "ca", "ca.pem")),
    });
    this.api = `${url}/rest/1.1`;
  }

  /** One request; a transport failure (reset, refused) rejects. */
  call(method: string, path: string, body?: string, headers: Record<string, string> = {}): Promise<Reply> {
    const url = path.startsWith("https:") ? path : `${this.api}${path}`;
    return new Promise((resolve, reject) => {
      const req = request(
        url,
        { method, agent: this.agent, headers: { Accept: "application/json", ...headers }, timeout: 30_000 },
        (res) => {
          let data = "";
          res.setEncoding("utf8");
          res.on("data", (d: string) => (data += d));
          res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: data }));
          res.on("error", reject);
        },
      );
      req.on("timeout", () => req.destroy(new Error("request timed out")));
      req.on("error", reject);
      req.end(body ?? "");
    });
  }

  /** Submits `xrsl` (`+(&...)(&...)` for several jobs); the reply plus the ids acknowledged. */
  async submit(xrsl: string, query = ""): Promise<Reply & { ids: string[]; items: JobItem[] }> {
    const r = await this.call("POST", `/jobs?action=new${query}`, xrsl, { "Content-Type": "application/rsl" });
    const items = r.status === 201 ? jobItems(r.body) : [];
    return { ...r, items, ids: items.filter((i) => i.id && i["status-code"] === "201").map((i) => i.id!) };
  }

  /** A bulk action (status, kill, clean, restart, delegations, ...) on `ids`. */
  async bulk(action: string, ids: readonly string[]): Promise<Reply & { items: JobItem[] }> {
    const r = await this.call("POST", `/jobs?action=${action}`, JSON.stringify({ job: ids.map((id) => ({ id })) }), {
      "Content-Type": "application/json",
    });
    return { ...r, items: r.status < 300 ? jobItems(r.body) : [] };
  }

  /** States by id (ids the CE does not know are absent). */
  async states(ids: readonly string[]): Promise<Map<string, string>> {
    const out = new Map<string, string>();
    for (let i = 0; i < ids.length; i += 500) {
      const r = await this.bulk("status", ids.slice(i, i + 500));
      if (r.status !== 201) throw new Error(`status: HTTP ${r.status} ${r.body.slice(0, 200)}`);
      for (const it of r.items) if (it.id && it.state) out.set(it.id, it.state);
    }
    return out;
  }

  /** Waits until every id is in one of `want`; returns the final states. */
  async waitStates(ids: readonly string[], want: readonly string[], ms: number, logs?: () => string): Promise<Map<string, string>> {
    const end = Date.now() + ms;
    for (;;) {
      const s = await this.states(ids).catch(() => new Map<string, string>());
      if (ids.every((id) => want.includes(s.get(id) ?? ""))) return s;
      if (Date.now() > end) {
        const stuck = ids
          .filter((id) => !want.includes(s.get(id) ?? ""))
          .slice(0, 5)
          .map((id) => `${id}=${s.get(id) ?? "missing"}`);
        throw new Error(`jobs not ${want.join("/")} after ${ms} ms: ${stuck.join(" ")}\n${logs?.().slice(-3000) ?? ""}`);
      }
      await new Promise((r) => setTimeout(r, 300));
    }
  }

  /** An X.509 delegation as arcsub makes it: new (CSR) → PUT the proxy signed with the user key. */
  async delegate(stack: Pick<Stack, "pki">): Promise<string> {
    const n = await this.call("POST", "/delegations?action=new", "", { Accept: "*/*" });
    if (n.status !== 201) throw new Error(`delegation new: HTTP ${n.status} ${n.body}`);
    const location = String(n.headers.location);
    const id = location.slice(location.lastIndexOf("/") + 1);
    const pki = stack.pki;
    const proxy = signCsrAsProxy(
      n.body,
      readFileSync(join(pki, "user", "cert.pem"), "utf8"),
      readFileSync(join(pki, "user", "key.pem"), "utf8"),
    );
    const put = await this.call("PUT", `/delegations/${id}`, proxy, { "Content-Type": "application/x-pem-file" });
    if (put.status !== 200) throw new Error(`delegation PUT: HTTP ${put.status} ${put.body}`);
    return id;
  }

  close(): void {
    this.agent.destroy();
  }
}

function jobItems(body: string): JobItem[] {
  const doc = JSON.parse(body) as { job?: JobItem | JobItem[] };
  return doc.job === undefined ? [] : Array.isArray(doc.job) ? doc.job : [doc.job];
}

/** `n` quick fork jobs in one xRSL submission. */
export function echoJobs(n: number, tag = "ha"): string {
  const one = `(&(executable="/bin/echo")(arguments="${tag}")(stdout="out")(jobname="${tag}"))`;
  return n === 1 ? `&${one.slice(2, -1)}` : `+${one.repeat(n)}`;
}
