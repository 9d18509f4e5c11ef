import { execFile, spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync, mkdirSync, existsSync } from "node:fs";
import { createConnection } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "./support/redis-server.js";

// The README's `./ce start` path end to end: scripts/start.sh generates the dev PKI and config,
// starts its own redis-server, the JEM and a gateway; the real ARC client then does a round trip.
const ROOT = resolve(import.meta.dirname, "..");
const run = promisify(execFile);
const hasArc = existsSync("/usr/bin/arcsub");

let state: string;
let work: string;
let start: ChildProcess;
let out = "";
let url: string;
let ports: { gw: number; admin: number; jem: number; redis: number };

const portOpen = (port: number) =>
  new Promise<boolean>((res) => {
    const s = createConnection({ host: "127.0.0.1", port }, () => (s.destroy(), res(true)));
    s.on("error", () => res(false));
  });

function arcEnv(): NodeJS.ProcessEnv {
  const pki = join(state, "pki");
  return { ...process.env, HOME: join(work, "home"), X509_USER_CERT: `${pki}/user/cert.pem`, X509_USER_KEY: `${pki}/user/key.pem`, X509_USER_PROXY: `${pki}/user/proxy.pem`, X509_CERT_DIR: `${pki}/ca` };
}

beforeAll(async () => {
  state = mkdtempSync(join(tmpdir(), "ce-front-"));
  work = mkdtempSync(join(tmpdir(), "ce-front-work-"));
  mkdirSync(join(work, "home"));
  ports = { gw: await freePort(), admin: await freePort(), jem: await freePort(), redis: await freePort() };
  url = `https://localhost:${ports.gw}/arex`;
  start = spawn("bash", ["scripts/start.sh"], {
    cwd: ROOT,
    env: {
      ...process.env,
      CE_STATE_DIR: state,
      CE__GATEWAY__PORT: String(ports.gw),
      CE__ENDPOINT__URL: url,
      CE__ADMIN__PORT: String(ports.admin),
      CE__ADMIN__JEM_PORT: String(ports.jem),
      CE__REDIS__URL: `redis://127.0.0.1:${ports.redis}`,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  start.stdout!.on("data", (d) => (out += String(d)));
  start.stderr!.on("data", (d) => (out += String(d)));
  const deadline = Date.now() + 120_000;
  while (!out.includes("CE running:")) {
    if (start.exitCode !== null || Date.now() > deadline) throw new Error(`./ce start did not come up:\n${out}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}, 150_000);

afterAll(async () => {
  if (start && start.exitCode === null) {
    const exited = new Promise((r) => start.once("exit", r));
    start.kill("SIGTERM");
    await exited;
  }
  rmSync(state, { recursive: true, force: true });
  rmSync(work, { recursive: true, force: true });
});

describe("front door: scripts/start.sh (= ./ce start)", () => {
  it("prints how to use the CE with the ARC client, curl and a browser", () => {
    expect(out).toContain(`CE running: ${url}`);
    expect(out).toContain(`arcsub -C ${url} -T arcrest`);
    expect(out).toContain(`${state}/pki/user/user.p12`);
    expect(out).toMatch(/started redis-server on 127\.0\.0\.1:\d+/);
  });

  it.skipIf(!hasArc)("a real arcsub → arcstat → arcget round trip works", async () => {
    writeFileSync(join(work, "run.sh"), "#!/bin/sh\necho \"ARGS: $1\"\ntr a-z A-Z < in.txt > out.txt\n");
    writeFileSync(join(work, "in.txt"), "front door\n");
    writeFileSync(join(work, "job.xrsl"), `&(executable="run.sh")(arguments="hello")(inputfiles=("run.sh" "")("in.txt" ""))(outputfiles=("out.txt" ""))(stdout="stdout.txt")(jobname="frontdoor")(queue="main")`);
    const env = arcEnv();
    const sub = await run("arcsub", ["-C", url, "-T", "arcrest", "job.xrsl"], { cwd: work, env });
    expect(sub.stdout).toMatch(/Job submitted with jobid: https:\/\/localhost:\d+\/arex\/rest\/1\.0\/jobs\/[0-9a-f-]{36}/);
    let stat = "";
    for (let i = 0; i < 120 && !/State: Finished/.test(stat); i++) {
      stat = (await run("arcstat", ["-a"], { cwd: work, env })).stdout;
      if (/State: (Failed|Killed)/.test(stat)) break;
      await new Promise((r) => setTimeout(r, 500));
    }
    expect(stat).toContain("State: Finished");
    const dl = join(work, "dl");
    mkdirSync(dl);
    const get = await run("arcget", ["-a"], { cwd: dl, env });
    expect(get.stdout).toContain("successfully retrieved: 1");
    const id = /Results stored at: (\S+)/.exec(get.stdout)![1]!;
    expect(readFileSync(join(dl, id, "out.txt"), "utf8")).toBe("FRONT DOOR\n");
    expect(readFileSync(join(dl, id, "stdout.txt"), "utf8")).toBe("ARGS: hello\n");
  }, 120_000);

  it("the admin listeners answer: health without a token, metrics only with it", async () => {
    const token = readFileSync(join(state, "secrets", "admin.token"), "utf8").trim();
    expect((await fetch(`http://127.0.0.1:${ports.admin}/healthz`)).status).toBe(200);
    expect((await fetch(`http://127.0.0.1:${ports.admin}/metrics`)).status).toBe(401);
    const m = await fetch(`http://127.0.0.1:${ports.jem}/metrics`, { headers: { authorization: `Bearer ${token}` } });
    expect(m.status).toBe(200);
    expect(await m.text()).toContain("ce_jobs");
    const q = await fetch(`http://127.0.0.1:${ports.jem}/queues?token=${token}`, { redirect: "manual" });
    expect([200, 302, 303]).toContain(q.status);
  });

  it("Ctrl-C (SIGTERM) stops everything it started, including its Redis", async () => {
    const exited = new Promise((r) => start.once("exit", r));
    start.kill("SIGTERM");
    await exited;
    await new Promise((r) => setTimeout(r, 500));
    for (const p of [ports.gw, ports.admin, ports.jem, ports.redis]) expect(await portOpen(p), `port ${p} still open`).toBe(false);
  });
});
