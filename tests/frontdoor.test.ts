import { execFile, spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync, mkdirSync, existsSync } from "node:fs";
import { createConnection, createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort, waitFor } from "@ce/testing";

// The README's `./ce start` path end to end, started as `pnpm start` is (its own process group, as
// a terminal runs it): scripts/start.sh generates the dev PKI and config, starts its own
// redis-server, the JEM and a gateway; the real ARC client then does a round trip. Only the
// gateway port is given (no endpoint URL): the banner must follow it.
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

/** The environment of the running CE (also what a second start in the same state dir gets). */
function ceEnv(): NodeJS.ProcessEnv {
  return {
    CE_STATE_DIR: state,
    CE__GATEWAY__PORT: String(ports.gw),
    CE__ADMIN__PORT: String(ports.admin),
    CE__ADMIN__JEM_PORT: String(ports.jem),
    CE__REDIS__URL: `redis://127.0.0.1:${ports.redis}`,
  };
}

/** Waits until `out` matches `re` (or fails naming what was printed). */
async function printed(re: RegExp, ms: number): Promise<RegExpExecArray> {
  return waitFor(`${re} in the output`, () => re.exec(out), ms, { detail: () => out });
}

/** Runs `./ce start` to its end: exit status, output, how long it took. */
async function startOnce(env: NodeJS.ProcessEnv, ms = 60_000): Promise<{ code: number | null; text: string; ms: number }> {
  const t0 = Date.now();
  const p = spawn("./ce", ["start"], { cwd: ROOT, env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
  let text = "";
  p.stdout!.on("data", (d) => (text += String(d)));
  p.stderr!.on("data", (d) => (text += String(d)));
  const timer = setTimeout(() => p.kill("SIGTERM"), ms);
  const code = await new Promise<number | null>((r) => p.once("exit", (c) => r(c)));
  clearTimeout(timer);
  return { code, text, ms: Date.now() - t0 };
}

/** No Node stack frame and no pnpm error line in a start-up answer. */
function noNoise(text: string) {
  expect(text).not.toMatch(/^\s+at .+:\d+:\d+\)?$/m);
  expect(text).not.toContain("ELIFECYCLE");
}

function arcEnv(): NodeJS.ProcessEnv {
  const pki = join(state, "pki");
  return {
    ...process.env,
    HOME: join(work, "home"),
    X509_USER_CERT: `${pki}/user/cert.pem`,
    X509_USER_KEY: `${pki}/user/key.pem`,
    X509_USER_PROXY: `${pki}/user/proxy.pem`,
    X509_CERT_DIR: `${pki}/ca`,
  };
}

beforeAll(async () => {
  state = mkdtempSync(join(tmpdir(), "ce-front-"));
  work = mkdtempSync(join(tmpdir(), "ce-front-work-"));
  mkdirSync(join(work, "home"));
  ports = { gw: await freePort(), admin: await freePort(), jem: await freePort(), redis: await freePort() };
  url = `https://localhost:${ports.gw}/arex`;
  start = spawn("pnpm", ["start"], { cwd: ROOT, env: { ...process.env, ...ceEnv() }, stdio: ["ignore", "pipe", "pipe"], detached: true });
  start.stdout!.on("data", (d) => (out += String(d)));
  start.stderr!.on("data", (d) => (out += String(d)));
  await waitFor(
    "./ce start to come up",
    () => {
      if (start.exitCode !== null) throw new Error(`./ce start exited (${start.exitCode}):\n${out}`);
      return out.includes("CE running:");
    },
    120_000,
    { everyMs: 200, detail: () => out },
  );
}, 150_000);

afterAll(async () => {
  if (start && start.exitCode === null) {
    const exited = new Promise((r) => start.once("exit", r));
    process.kill(-start.pid!, "SIGTERM");
    await exited;
  }
  rmSync(state, { recursive: true, force: true });
  rmSync(work, { recursive: true, force: true });
});

describe("front door: scripts/start.sh (= ./ce start)", () => {
  it("prints how to use the CE with the ARC client, curl and a browser", () => {
    expect(out).toContain(`CE running: ${url}   (back end: fork)`);
    // What the gateway itself reported listening on, not the configuration's default.
    expect(out).toContain(`Gateway: listening on https://127.0.0.1:${ports.gw} (pid `);
    expect(out).toContain(`http://127.0.0.1:${ports.jem}/queues (JEM queues)`);
    expect(out).toContain(`arcsub -C ${url} -T arcrest`);
    expect(out).toContain(`${state}/pki/user/user.p12`);
    expect(out).toMatch(/started redis-server on 127\.0\.0\.1:\d+/);
  });

  it.skipIf(!hasArc)(
    "a real arcsub → arcstat → arcget round trip works",
    async () => {
      writeFileSync(join(work, "run.sh"), '#!/bin/sh\necho "ARGS: $1"\ntr a-z A-Z < in.txt > out.txt\n');
      writeFileSync(join(work, "in.txt"), "front door\n");
      writeFileSync(
        join(work, "job.xrsl"),
        `&(executable="run.sh")(arguments="hello")(inputfiles=("run.sh" "")("in.txt" ""))(outputfiles=("out.txt" ""))(stdout="stdout.txt")(jobname="frontdoor")(queue="main")`,
      );
      const env = arcEnv();
      const sub = await run("arcsub", ["-C", url, "-T", "arcrest", "job.xrsl"], { cwd: work, env });
      expect(sub.stdout).toMatch(/Job submitted with jobid: https:\/\/localhost:\d+\/arex\/rest\/1\.0\/jobs\/[0-9a-f-]{36}/);
      const stat = await waitFor(
        "the job to end",
        async () => {
          const stat = (await run("arcstat", ["-a"], { cwd: work, env })).stdout;
          return /State: (Finished|Failed|Killed)/.test(stat) ? stat : undefined;
        },
        75_000,
        { everyMs: 500 },
      );
      expect(stat).toContain("State: Finished");
      const dl = join(work, "dl");
      mkdirSync(dl);
      const get = await run("arcget", ["-a"], { cwd: dl, env });
      expect(get.stdout).toContain("successfully retrieved: 1");
      const id = /Results stored at: (\S+)/.exec(get.stdout)![1]!;
      expect(readFileSync(join(dl, id, "out.txt"), "utf8")).toBe("FRONT DOOR\n");
      expect(readFileSync(join(dl, id, "stdout.txt"), "utf8")).toBe("ARGS: hello\n");
    },
    120_000,
  );

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

  it("a second start in the same state directory says so and exits, leaving the running CE alone", async () => {
    const pid = readFileSync(join(state, "ce.pid"), "utf8").trim();
    const r = await startOnce(ceEnv(), 30_000);
    expect(r.code).toBe(1);
    expect(r.text).toContain(`ce: cannot start: a CE is already running from ${state} (pid ${pid}, ${url})`);
    expect(r.text).not.toContain("CE running");
    noNoise(r.text);
    expect((await fetch(`http://127.0.0.1:${ports.jem}/healthz`)).status).toBe(200);
  });

  it("a JEM that dies is brought back, with a line saying how it exited and its last log line", async () => {
    const pid = Number(readFileSync(join(state, "run", "jem.pid"), "utf8"));
    process.kill(pid, "SIGKILL");
    await printed(
      new RegExp(`ce: the JEM \\(pid ${pid}\\) exited with signal SIGKILL after \\d+ s; last log line: .+; restarting in 1 s`),
      10_000,
    );
    const back = await printed(/ce: the JEM is back \(pid (\d+)\)/, 60_000);
    expect(Number(back[1])).not.toBe(pid);
    expect(Number(readFileSync(join(state, "run", "jem.pid"), "utf8"))).toBe(Number(back[1]));
    expect((await fetch(`http://127.0.0.1:${ports.jem}/healthz`)).status).toBe(200);
    expect(start.exitCode).toBeNull();
  }, 90_000);

  it("Ctrl-C (SIGINT to its process group, as a terminal sends it) stops everything it started, exit 0 without a pnpm error line", async () => {
    const exited = new Promise<number | null>((r) => start.once("exit", (c) => r(c)));
    process.kill(-start.pid!, "SIGINT");
    expect(await exited).toBe(0);
    expect(out).not.toContain("ELIFECYCLE");
    const ports4 = [ports.gw, ports.admin, ports.jem, ports.redis];
    await waitFor("every port closed", async () => (await Promise.all(ports4.map(portOpen))).every((open) => !open), 5_000).catch(
      () => undefined,
    );
    for (const p of ports4) expect(await portOpen(p), `port ${p} still open`).toBe(false);
    expect(existsSync(join(state, "ce.pid"))).toBe(false);
  });
});

// Mistakes get one line naming them, quickly, and a non-zero exit; each in a state dir of its own.
describe("front door: start-up mistakes", () => {
  let bad: string;
  let p: { gw: number; admin: number; jem: number; redis: number };
  const env = (extra: NodeJS.ProcessEnv = {}) => ({
    CE_STATE_DIR: bad,
    CE__GATEWAY__PORT: String(p.gw),
    CE__ADMIN__PORT: String(p.admin),
    CE__ADMIN__JEM_PORT: String(p.jem),
    CE__REDIS__URL: `redis://127.0.0.1:${p.redis}`,
    ...extra,
  });
  beforeAll(async () => {
    bad = mkdtempSync(join(tmpdir(), "ce-front-bad-"));
    p = { gw: await freePort(), admin: await freePort(), jem: await freePort(), redis: await freePort() };
  });
  afterAll(() => rmSync(bad, { recursive: true, force: true }));

  it("an unknown CE__ variable: one line naming it and the variable meant", async () => {
    const r = await startOnce(env({ CE__ADMIN__JEMPORT: "9445" }));
    expect(r.code).toBe(1);
    expect(r.text).toContain(
      "ce: cannot start: invalid configuration: unknown key CE__ADMIN__JEMPORT in the environment (did you mean CE__ADMIN__JEM_PORT?)\n",
    );
    expect(r.text).not.toContain("started redis-server");
    noNoise(r.text);
  }, 60_000);

  it("an unknown key in the file: one line naming the key, the file and the key meant", async () => {
    const file = join(bad, "typo.yaml");
    writeFileSync(file, "gatway:\n  port: 9443\nlrms:\n  backnd: slurm\n");
    const r = await startOnce(env({ CE_CONFIG: file }));
    expect(r.code).toBe(1);
    const line = r.text.split("\n").find((l) => l.startsWith("ce: cannot start:"));
    expect(line).toContain(`unknown key "gatway" in ${file} (did you mean "gateway"?)`);
    expect(line).toContain(`unknown key "lrms.backnd" in ${file} (did you mean "lrms.backend"?)`);
    noNoise(r.text);
  }, 60_000);

  it("a port in use: one line naming the address and the key, quickly, nothing started", async () => {
    const busy: Server = createServer();
    await new Promise<void>((r) => busy.listen(p.gw, "127.0.0.1", () => r()));
    try {
      const r = await startOnce(env(), 30_000);
      expect(r.code).toBe(1);
      expect(r.text).toContain(`ce: cannot start: 127.0.0.1:${p.gw} (gateway.port) is already in use by another program`);
      expect(r.ms).toBeLessThan(20_000);
      expect(r.text).not.toContain("started redis-server");
      noNoise(r.text);
    } finally {
      busy.close();
    }
  }, 60_000);

  it("a component that does not come up: non-zero, its own reason and its log lines from this run, nothing left running", async () => {
    const r = await startOnce(env({ CE__LRMS__BACKEND: "slurmm" }), 90_000);
    expect(r.code).toBe(1);
    expect(r.text).toMatch(
      /ce: the JEM did not start: it exited \(exit code 1\); last log line: jem: cannot start: lrms back end "slurmm": \S+ is missing or not executable/,
    );
    expect(r.text).toContain(`ce: the last lines of ${bad}/logs/jem.log from this run:`);
    expect(r.text).not.toContain("CE running");
    noNoise(r.text);
    for (const port of [p.gw, p.admin, p.jem, p.redis]) expect(await portOpen(port), `port ${port} still open`).toBe(false);
  }, 120_000);

  it("the gateway and the JEM themselves answer a start-up mistake with one line on stderr", async () => {
    const gwRun = new Promise<{ code: number | null; err: string }>((res) => {
      const c = spawn(process.execPath, ["--import", "tsx", "apps/gateway/src/main.ts"], {
        cwd: ROOT,
        env: {
          ...process.env,
          ...env({
            CE__GATEWAY__TLS__CERT_FILE: join(bad, "missing-cert.pem"),
            CE__GATEWAY__TLS__KEY_FILE: join(bad, "missing-key.pem"),
            CE__PATHS__STATE_DIR: bad,
            CE__AUTH__CA_DIR: bad,
          }),
        },
        stdio: ["ignore", "ignore", "pipe"],
      });
      let err = "";
      c.stderr!.on("data", (d) => (err += String(d)));
      // A gateway that starts after all must not outlive the test.
      const t = setTimeout(() => c.kill("SIGKILL"), 45_000);
      c.once("exit", (code) => (clearTimeout(t), res({ code, err })));
    });
    const jemRun = run(process.execPath, ["--import", "tsx", "apps/jem/src/main.ts"], {
      cwd: ROOT,
      env: { ...process.env, CE__LRMS__BACKND: "slurm" },
    }).then(
      () => ({ code: 0, stderr: "" }),
      (e: { code: number; stderr: string }) => e,
    );
    // Both at once: each boots through tsx, which takes a while on a busy machine.
    const [gw, jem] = await Promise.all([gwRun, jemRun]);
    expect(gw.code).toBe(1);
    expect(gw.err).toBe(
      `gateway: cannot start: cannot open ${join(bad, "missing-cert.pem")}: no such file or directory (gateway.tls.certFile)\n`,
    );
    expect(jem.code).toBe(1);
    expect(jem.stderr).toBe(
      "jem: cannot start: invalid configuration: unknown key CE__LRMS__BACKND in the environment (did you mean CE__LRMS__BACKEND?)\n",
    );
  }, 60_000);
});
