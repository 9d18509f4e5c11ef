import { createServer, type IncomingMessage, type Server } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Jem } from "../src/daemon.js";
import { output, shellJob, submitTestJob, testEnv, testJem, waitForRest, type TestEnv } from "./helpers.js";

// Staging connects from inside the site to URLs a job chose: internal addresses and the CE's own
// listeners are refused unless the site opened them (staging.allowNetworks), on every hop.
let env: TestEnv;
let jem: Jem;
/** On 127.0.0.1: loopback, never opened here. */
let inside: Server;
/** On 127.0.0.2, the one address this CE opens: `/ok` answers, `/to?u=` redirects. */
let storage: Server;
/** Stands in for the JEM's admin listener: on the opened address, but the CE's own. */
let admin: Server;
const seen: string[] = [];
let insideUrl: string;
let storageUrl: string;
let adminUrl: string;

function serve(host: string, name: string): Promise<{ server: Server; url: string }> {
  const server = createServer((req: IncomingMessage, res) => {
    seen.push(`${name} ${req.method} ${req.url}`);
    const to = new URL(req.url ?? "/", "http://x").searchParams.get("u");
    if (to) return void res.writeHead(302, { location: to }).end();
    res.writeHead(req.method === "PUT" ? 201 : 200).end(req.method === "PUT" ? "" : `${name} data`);
  });
  return new Promise((resolve) =>
    server.listen(0, host, () => resolve({ server, url: `http://${host}:${(server.address() as { port: number }).port}` })),
  );
}

beforeAll(async () => {
  ({ server: inside, url: insideUrl } = await serve("127.0.0.1", "inside"));
  ({ server: storage, url: storageUrl } = await serve("127.0.0.2", "storage"));
  ({ server: admin, url: adminUrl } = await serve("127.0.0.2", "admin"));
  env = await testEnv({
    staging: { maxRetries: 0, allowNetworks: ["127.0.0.2/32"] },
    admin: { host: "127.0.0.2", jemPort: Number(new URL(adminUrl).port) },
  });
  jem = await testJem(env);
});
afterAll(async () => {
  await jem?.stop();
  await env?.close();
  for (const s of [inside, storage, admin]) {
    s?.closeAllConnections();
    s?.close();
  }
});

const input = (source: string) => ({ inputFiles: [{ name: "in", source, executable: false, options: {} }] });

describe("staging destination policy", () => {
  it("refuses a loopback input, naming the rule, without contacting it", async () => {
    const id = await submitTestJob(env, shellJob("true", input(`${insideUrl}/secret`)));
    const r = await waitForRest(env, id, ["FINISHED", "FAILED"]);
    expect(r?.rest).toBe("FAILED");
    expect(r?.failure).toContain(`input ${insideUrl}/secret refused: 127.0.0.1 is loopback (staging.allowNetworks does not include it)`);
    expect(seen.filter((s) => s.startsWith("inside"))).toEqual([]);
  });

  it("opens what staging.allowNetworks lists", async () => {
    const id = await submitTestJob(env, shellJob('test "$(cat in)" = "storage data"', input(`${storageUrl}/ok`)));
    const r = await waitForRest(env, id, ["FINISHED", "FAILED"]);
    expect(r?.failure).toBeUndefined();
    expect(r?.rest).toBe("FINISHED");
  });

  it("checks every redirect: an allowed server redirecting to loopback is refused", async () => {
    const id = await submitTestJob(env, shellJob("true", input(`${storageUrl}/to?u=${encodeURIComponent(`${insideUrl}/metadata`)}`)));
    const r = await waitForRest(env, id, ["FINISHED", "FAILED"]);
    expect(r?.rest).toBe("FAILED");
    expect(r?.failure).toMatch(/refused: 127\.0\.0\.1 is loopback/);
    expect(seen).toContain("storage GET /to?u=" + encodeURIComponent(`${insideUrl}/metadata`));
    expect(seen.filter((s) => s.startsWith("inside"))).toEqual([]);
  });

  it("refuses the CE's own listener even on an allowed network", async () => {
    const id = await submitTestJob(env, shellJob("true", input(`${adminUrl}/healthz`)));
    const r = await waitForRest(env, id, ["FINISHED", "FAILED"]);
    expect(r?.rest).toBe("FAILED");
    expect(r?.failure).toContain(`127.0.0.2:${new URL(adminUrl).port} is this CE's own admin.jemPort listener`);
    expect(seen.filter((s) => s.startsWith("admin"))).toEqual([]);
  });

  it("refuses stage-out to loopback (PUT and MKCOL never sent)", async () => {
    const id = await submitTestJob(
      env,
      shellJob("echo hi > out.txt", { outputFiles: [output("out.txt", { target: `${insideUrl}/deep/out.txt` })] }),
    );
    const r = await waitForRest(env, id, ["FINISHED", "FAILED"]);
    expect(r?.rest).toBe("FAILED");
    expect(r?.failure).toMatch(/output .*refused: 127\.0\.0\.1 is loopback/);
    expect(seen.filter((s) => s.startsWith("inside"))).toEqual([]);
  });
});
