/**
 * Wire contract where the job's progress matters: "States and transitions" and the E5/E7 answers
 * about jobs the job execution manager has run. A whole CE (gateway and JEM as processes, fork
 * back end, @ce/testing/stack) and the same checks as the other wire files; see wire.ts.
 */
import { readFileSync } from "node:fs";
import { Agent, request as httpsRequest } from "node:https";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import type { Reply, RequestOptions } from "../../apps/gateway/test/harness.js";
import { startStack, type Stack } from "@ce/testing/stack";
import { ACCEPT, DIAGNOSE_TYPES, FORMATS, REST_STATE_NAMES, bulk, expectItemBasics, kids, submit, until, type XNode } from "./wire.js";

let stack: Stack;
let client: { rest: string; request(method: string, path: string, o?: RequestOptions): Promise<Reply> };
let agent: Agent;

beforeAll(async () => {
  stack = await startStack({ redisUrl: inject("redisUrl"), redisUsers: inject("redisUsers"), backend: "fork" });
  // The user's proxy file: certificate, key, rest of the chain (grid layout).
  const pem = readFileSync(stack.arcEnv.X509_USER_PROXY!, "utf8");
  const blocks = pem.match(/-----BEGIN [^-]+-----[\s\S]+?-----END [^-]+-----\n?/g)!;
  agent = new Agent({
    keepAlive: true,
    ca: readFileSync(join(stack.pki, "ca", "ca.pem")),
    cert: blocks.filter((b) => b.includes("CERTIFICATE")).join(""),
    key: blocks.find((b) => b.includes("PRIVATE KEY")),
  });
  const url = new URL(stack.url);
  client = {
    rest: `${url.pathname}/rest`,
    request: (method, path, o = {}) =>
      new Promise((resolve, reject) => {
        const headers: Record<string, string> = { ...o.headers, ...(o.accept ? { accept: o.accept } : {}) };
        if (o.body !== undefined) headers["content-length"] = String(Buffer.byteLength(o.body));
        const req = httpsRequest({ host: url.hostname, port: url.port, method, path, headers, agent }, (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (d: Buffer) => chunks.push(d));
          res.on("end", () => {
            const body = Buffer.concat(chunks);
            const text = body.toString("utf8");
            resolve({
              status: res.statusCode ?? 0,
              statusMessage: res.statusMessage ?? "",
              headers: res.headers,
              text,
              body,
              json: () => JSON.parse(text),
            });
          });
        });
        req.on("error", reject);
        req.end(o.body);
      }),
  };
}, 120_000);

afterAll(async () => {
  agent?.destroy();
  await stack?.stop();
}, 60_000);

/** Every state a status answer names on the way must be one of the 17 REST names. */
const seen = new Set<string>();
async function stateOf(id: string, fmt: "json" | "xml" = "json"): Promise<string> {
  const { r, items } = await bulk(client, "1.1", "status", [id], fmt);
  expect(r.status).toBe(201);
  expect(items[0]!["status-code"]).toBe("200");
  const s = items[0]!.state!;
  seen.add(s);
  return s;
}
const waitState = (id: string, want: readonly string[], ms = 60_000) =>
  until(
    async () => {
      const s = await stateOf(id);
      return want.includes(s) ? s : undefined;
    },
    ms,
    `job ${id} in ${want.join("/")}`,
  );

/** A job of its own that ran to FINISHED, for the checks about finished jobs (shared, made once). */
let finished: Promise<string> | undefined;
const aFinishedJob = () =>
  (finished ??= (async () => {
    const { items } = await submit(client, "1.1", '&(executable="/bin/echo")(arguments="done")(stdout="out.txt")', "json");
    const id = items[0]!.id!;
    await waitState(id, ["FINISHED"]);
    return id;
  })());

describe("States and transitions, through a whole CE", () => {
  it("a job waiting for client uploads: submitted ACCEPTING, then FINISHED once its input arrives; info says arcrest:FINISHED", async () => {
    for (const fmt of FORMATS) {
      const { r, items } = await submit(
        client,
        "1.1",
        '&(executable="/bin/cat")(arguments="in.txt")(inputfiles=("in.txt" ""))(stdout="out.txt")(outputfiles=("out.txt" ""))',
        fmt,
      );
      expect(r.status).toBe(201);
      expectItemBasics(items, fmt, r);
      // E4: "A successful item has status-code 201, reason text for Created, the job id and state ACCEPTING."
      expect(items[0]).toMatchObject({ "status-code": "201", reason: "Created", state: "ACCEPTING" });
      const id = items[0]!.id!;
      expect((await client.request("PUT", `${client.rest}/1.1/jobs/${id}/session/in.txt`, { body: `wire ${fmt}\n` })).status).toBe(200);
      await waitState(id, ["FINISHED", "FAILED"]);
      expect(await stateOf(id, "xml")).toBe("FINISHED");
      expect((await client.request("GET", `${client.rest}/1.1/jobs/${id}/session/out.txt`)).text).toBe(`wire ${fmt}\n`);
      const info = await bulk(client, "1.0", "info", [id], "xml");
      const act = kids(info.items[0]!.info_document as XNode, "ComputingActivity")[0]!;
      expect(kids(act, "State").map((s) => s.text)).toContain("arcrest:FINISHED");
    }
  }, 150_000);

  it("E3 state filter: a finished job is listed under FINISHED, not under ACCEPTING", async () => {
    const id = await aFinishedJob();
    const r = await client.request("GET", `${client.rest}/1.1/jobs?state=FINISHED`, { accept: ACCEPT.json });
    expect(r.status).toBe(200);
    // Items of a filtered list also carry their state (Deviation #32).
    expect(r.json().job).toContainEqual({ id, state: "FINISHED" });
    const other = await client.request("GET", `${client.rest}/1.1/jobs?state=ACCEPTING`, { accept: ACCEPT.json });
    expect(other.json().job.map((j: { id: string }) => j.id)).not.toContain(id);
  }, 90_000);

  it("a failing job ends FAILED; restart → per-item 202 (queued) and the job leaves FAILED", async () => {
    const { items } = await submit(client, "1.0", '&(executable="/bin/sh")(arguments="-c" "sleep 2; exit 3")(rerun=1)', "xml");
    const id = items[0]!.id!;
    await waitState(id, ["FAILED"]);
    const { r, items: res } = await bulk(client, "1.0", "restart", [id], "xml");
    expect(r.status).toBe(201);
    // "Requests kill, clean, restart are accepted with code 202 (queued for later execution)".
    expect(res[0]).toMatchObject({ "status-code": "202", reason: "Queued for restarting", id });
    // The resulting state of a restart "is not stated"; the job leaves FAILED, runs anew and fails again.
    await until(async () => ((await stateOf(id)) !== "FAILED" ? true : undefined), 30_000, `job ${id} restarted`);
    await waitState(id, ["FAILED"], 90_000);
  }, 150_000);

  it("kill: 202; KILLING → KILLED on completion of termination", async () => {
    const { items } = await submit(client, "1.1", '&(executable="/bin/sleep")(arguments="300")', "json");
    const id = items[0]!.id!;
    await waitState(id, ["RUNNING", "QUEUING"]);
    const { items: res } = await bulk(client, "1.1", "kill", [id], "json");
    expect(res[0]).toMatchObject({ "status-code": "202", reason: "Queued for killing", id });
    await waitState(id, ["KILLED"]);
  }, 120_000);

  it("diagnose: a run job answers each of the 14 types with 200 or 404, and has errors, diag and status", async () => {
    const id = await aFinishedJob();
    for (const type of DIAGNOSE_TYPES) {
      const r = await client.request("GET", `${client.rest}/1.1/jobs/${id}/diagnose/${type}`);
      expect([200, 404], type).toContain(r.status);
    }
    for (const type of ["errors", "diag", "status", "description"]) {
      expect((await client.request("GET", `${client.rest}/1.1/jobs/${id}/diagnose/${type}`)).status, type).toBe(200);
    }
  }, 90_000);

  it("clean of a finished job: 202 (queued)", async () => {
    const id = await aFinishedJob();
    const { items } = await bulk(client, "1.1", "clean", [id], "json");
    expect(items[0]).toMatchObject({ "status-code": "202", reason: "Queued for cleaning", id });
  }, 90_000);

  it("every state a status answer named on the way is one of the 17 REST state names", () => {
    expect(seen.size).toBeGreaterThan(2);
    for (const s of seen) expect(REST_STATE_NAMES).toContain(s);
  });
});
