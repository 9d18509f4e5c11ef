import { request } from "node:https";
import { readFileSync } from "node:fs";

/** Minimal REST client for the stack under test: the dev user's certificate, the dev CA trusted. */
export interface CeClient {
  call(
    method: string,
    path: string,
    body?: string,
    headers?: Record<string, string>,
  ): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: string }>;
  /** Submits one xRSL description (1.1); returns the new job id. */
  submit(xrsl: string): Promise<string>;
  /** Polls `action=status` until every job is in one of `final`; returns id → state. */
  waitForStates(ids: string[], final: readonly string[], timeoutMs?: number): Promise<Record<string, string>>;
}

interface BulkReply {
  job: { "status-code": string; reason: string; id?: string; state?: string }[];
}

export function ceClient(url: string, pki: string): CeClient {
  const u = new URL(url);
  const tls = {
    ca: readFileSync(`${pki}/ca/ca.pem`),
    cert: readFileSync(`${pki}/user/cert.pem`),
    key: readFileSync(`${pki}/user/key.pem`),
  };
  const call: CeClient["call"] = (method, path, body, headers = {}) =>
    new Promise((res, rej) => {
      const req = request(
        {
          host: u.hostname,
          port: u.port,
          method,
          path: `${u.pathname}${path}`,
          ...tls,
          headers: { accept: "application/json", ...headers },
        },
        (r) => {
          let data = "";
          r.setEncoding("utf8");
          r.on("data", (d) => (data += d));
          r.on("end", () => res({ status: r.statusCode ?? 0, headers: r.headers, body: data }));
        },
      );
      req.on("error", rej);
      req.end(body);
    });
  const bulk = async (action: string, body: string, contentType: string): Promise<BulkReply> => {
    const r = await call("POST", `/rest/1.1/jobs?action=${action}`, body, { "content-type": contentType });
    if (r.status !== 201 && r.status !== 200) throw new Error(`${action}: HTTP ${r.status} ${r.body}`);
    return JSON.parse(r.body) as BulkReply;
  };
  return {
    call,
    async submit(xrsl) {
      const reply = await bulk("new", xrsl, "application/rsl");
      const item = reply.job[0];
      if (!item?.id || item["status-code"] !== "201") throw new Error(`submission refused: ${JSON.stringify(reply)}`);
      return item.id;
    },
    async waitForStates(ids, final, timeoutMs = 60_000) {
      const deadline = Date.now() + timeoutMs;
      const body = JSON.stringify({ job: ids.map((id) => ({ id })) });
      for (;;) {
        const reply = await bulk("status", body, "application/json");
        const states = Object.fromEntries(reply.job.map((j) => [j.id ?? "", j.state ?? ""]));
        if (ids.every((id) => final.includes(states[id] ?? ""))) return states;
        if (Date.now() > deadline) throw new Error(`jobs did not reach ${final.join("/")}: ${JSON.stringify(states)}`);
        await new Promise((r) => setTimeout(r, 500));
      }
    },
  };
}
