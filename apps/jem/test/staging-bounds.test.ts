import { createServer as createHttpServer, type Server } from "node:http";
import { createServer as createTcpServer, type Server as TcpServer, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Jem } from "../src/daemon.js";
import { shellJob, submitTestJob, testEnv, testJem, waitForRest, type TestEnv } from "./helpers.js";
import { waitFor } from "@ce/testing";

// Transfer slots are a shared resource: one owner's storage that accepts and never answers, or
// keeps failing, must not keep another owner's (or the same owner's other) small inputs waiting.
const OTHER = "/DC=org/DC=test/CN=Other User";
const THIRD = "/DC=org/DC=test/CN=Third User";

let env: TestEnv;
let jem: Jem;
let hanging: TcpServer;
const held = new Set<Socket>();
let maxHeld = 0;
let files: Server;
let hangUrl: string;
let filesUrl: string;
let busyAnswers = 0;

const listen = (s: TcpServer | Server) =>
  new Promise<number>((resolve) => s.listen(0, "127.0.0.1", () => resolve((s.address() as { port: number }).port)));

beforeAll(async () => {
  // Accepts, reads the request, never answers.
  hanging = createTcpServer((sock) => {
    held.add(sock);
    maxHeld = Math.max(maxHeld, held.size);
    sock.on("close", () => held.delete(sock));
    sock.on("error", () => undefined);
  });
  hangUrl = `http://127.0.0.1:${await listen(hanging)}`;
  // `/ok/...` answers 32 bytes, `/busy/...` always 503.
  files = createHttpServer((req, res) => {
    if (req.url?.startsWith("/busy/")) return void (busyAnswers++, res.writeHead(503).end("busy"));
    res.writeHead(200, { "content-length": 32 }).end("x".repeat(32));
  });
  filesUrl = `http://127.0.0.1:${await listen(files)}`;
  env = await testEnv({
    // Long attempt bounds: without fairness the hanging transfers hold their slots for minutes.
    staging: {
      maxConcurrentTransfers: 4,
      maxTransfersPerOwner: 2,
      maxRetries: 1,
      retryBaseMs: 20_000,
      timeoutMs: 300_000,
      idleTimeoutMs: 120_000,
    },
  });
  jem = await testJem(env);
});
afterAll(async () => {
  await jem?.stop();
  await env?.close();
  for (const s of held) s.destroy();
  hanging?.close();
  files?.closeAllConnections();
  files?.close();
});

const inputs = (base: string, n: number, tag: string) =>
  Array.from({ length: n }, (_, i) => ({ name: `in${i}`, source: `${base}/${tag}/${i}`, executable: false, options: {} }));

describe("staging transfer slots", () => {
  it("an owner whose storage hangs holds at most its share; another owner's small input completes promptly", async () => {
    for (let j = 0; j < 3; j++) await submitTestJob(env, shellJob("true", { inputFiles: inputs(hangUrl, 4, `hang${j}`) }));
    await waitFor("two transfers held by the hanging storage", () => held.size >= 2, 10_000, { everyMs: 50 });
    const id = await submitTestJob(env, shellJob("test $(wc -c < in0) -eq 32", { inputFiles: inputs(filesUrl, 1, "ok") }), {
      owner: OTHER,
    });
    const started = Date.now();
    const r = await waitForRest(env, id, ["FINISHED", "FAILED"], 15_000);
    expect(r?.failure).toBeUndefined();
    expect(r?.rest).toBe("FINISHED");
    expect(Date.now() - started).toBeLessThan(15_000);
    // The per-owner cap, seen from the hanging server.
    expect(maxHeld).toBeLessThanOrEqual(2);
  });

  it("no slot is held while a failed transfer waits to be retried", async () => {
    // Both of this owner's slots fail at once and wait 20 s to retry; its next input must not wait for that.
    const failing = await submitTestJob(env, shellJob("true", { inputFiles: inputs(filesUrl, 2, "busy") }), { owner: THIRD });
    await waitForRest(env, failing, ["PREPARING"], 10_000);
    await waitFor("both of the owner's transfers refused", () => busyAnswers >= 2, 10_000);
    const id = await submitTestJob(env, shellJob("test $(wc -c < in0) -eq 32", { inputFiles: inputs(filesUrl, 1, "ok") }), {
      owner: THIRD,
    });
    const r = await waitForRest(env, id, ["FINISHED", "FAILED"], 12_000);
    expect(r?.rest).toBe("FINISHED");
  });
});
