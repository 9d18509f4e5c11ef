/**
 * Containment, limits kept and clean pool accounts (docs/fork-containment.md), against a whole CE (JEM as root, fork, a pool of
 * one account, useradd; root only): a job's setsid double-forked daemon ends with the job; a pool
 * account with anything of its last holder left (a process started outside any job, a file that
 * cannot be removed) is not handed to the next identity, which is refused until the account is
 * clean; `sleep 120` with a 1-minute walltime ends FAILED with "walltime exceeded" (limits scaled
 * by lrms.fork.timeLimitScale: the description keeps its minutes).
 */
import { spawn, spawnSync } from "node:child_process";
import { createPrivateKey, X509Certificate } from "node:crypto";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { issueUserCert } from "@ce/x509/testing";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { TestAccounts } from "@ce/mapping/testing";
import { startStack, type Stack } from "@ce/testing/stack";
import { waitFor } from "@ce/testing";

const ROOT = TestAccounts.available();

interface Cred {
  cert: string;
  key: string;
}

function issue(stack: Stack, cn: string): Cred {
  const certPem = readFileSync(join(stack.pki, "ca", "ca.pem"), "utf8");
  const keyPem = readFileSync(join(stack.pki, "ca-private", "ca.key"), "utf8");
  const ca = { certPem, keyPem, cert: new X509Certificate(certPem), key: createPrivateKey(keyPem) } as Parameters<typeof issueUserCert>[0];
  const u = issueUserCert(ca, { dn: `/DC=org/DC=ce-dev/O=Users/CN=${cn}` });
  const dir = join(stack.state, "creds", cn.replace(/\W/g, "_"));
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "cert.pem"), u.certPem);
  writeFileSync(join(dir, "key.pem"), u.keyPem, { mode: 0o600 });
  return { cert: join(dir, "cert.pem"), key: join(dir, "key.pem") };
}

function client(stack: Stack, cred: Cred) {
  const api = `${stack.url}/rest/1.1`;
  const curl = (args: string[], body = "") => {
    const r = spawnSync(
      "curl",
      ["-s", "-w", "\n%{http_code}", "--cacert", join(stack.pki, "ca", "ca.pem"), "--cert", cred.cert, "--key", cred.key, ...args],
      { encoding: "utf8", input: body },
    );
    const i = r.stdout.lastIndexOf("\n");
    return { status: Number(r.stdout.slice(i + 1)), body: r.stdout.slice(0, i) };
  };
  const action = (name: string, id: string) =>
    curl(
      [
        "-X",
        "POST",
        "-H",
        "Content-Type: application/json",
        "-H",
        "Accept: application/json",
        "--data-binary",
        "@-",
        `${api}/jobs?action=${name}`,
      ],
      JSON.stringify({ job: [{ id }] }),
    );
  return {
    submit(xrsl: string): { id?: string; body: string } {
      const r = curl(
        [
          "-X",
          "POST",
          "-H",
          "Content-Type: application/rsl",
          "-H",
          "Accept: application/json",
          "--data-binary",
          "@-",
          `${api}/jobs?action=new`,
        ],
        xrsl,
      );
      let item: { id?: string } | undefined;
      try {
        item = (JSON.parse(r.body) as { job?: Array<{ id?: string }> }).job?.[0];
      } catch {
        item = undefined;
      }
      return { ...(item?.id ? { id: item.id } : {}), body: `${r.status} ${r.body}` };
    },
    state: (id: string) => (JSON.parse(action("status", id).body) as { job: Array<{ state?: string }> }).job[0]?.state ?? "?",
    info: (id: string) => action("info", id).body,
    clean: (id: string) => action("clean", id).status,
    async waitState(id: string, want: string[], ms = 90_000): Promise<string> {
      const s = () => this.state(id);
      return waitFor(`job ${id} in ${want.join("/")}`, () => (want.includes(s()) ? s() : undefined), ms, {
        everyMs: 300,
        detail: () => `it is ${s()}\n${stack.logs().slice(-3000)}`,
      });
    },
  };
}

const until = (what: string, fn: () => boolean, ms = 30_000) => waitFor(what, fn, ms, { everyMs: 250 });

describe.skipIf(!ROOT)("no process of a job outlives it; no pool account changes hands dirty (fork, JEM as root)", () => {
  const accounts = new TestAccounts();
  let stack: Stack;
  let acct: string;
  let first: ReturnType<typeof client>;
  let second: ReturnType<typeof client>;
  const procs = () => spawnSync("pgrep", ["-u", acct], { encoding: "utf8" }).stdout.trim();
  const stuck = "/var/tmp";
  let stuckFile = "";

  beforeAll(async () => {
    acct = await accounts.add("ct");
    stuckFile = join(stuck, `${acct}-stuck`);
    stack = await startStack({
      redisUrl: inject("redisUrl"),
      redisUsers: inject("redisUsers"),
      backend: "fork",
      config: {
        mapping: { leaseGraceSeconds: 0, rules: [{ name: "pool", match: "*", pool: { accounts: [acct] } }] },
        lrms: { fork: { timeLimitScale: 0.05 } },
        jem: { expiryIntervalMs: 1_000 },
      },
    });
    first = client(stack, { cert: stack.arcEnv.X509_USER_CERT!, key: stack.arcEnv.X509_USER_KEY! });
    second = client(stack, issue(stack, "Next Holder"));
  }, 120_000);

  afterAll(async () => {
    spawnSync("chattr", ["-i", stuckFile]);
    spawnSync("rm", ["-f", stuckFile]);
    await stack?.stop();
    spawnSync("pkill", ["-KILL", "-u", acct]);
    await accounts.remove();
  }, 60_000);

  it("a setsid double-forked daemon ends with its job", async () => {
    const s = first.submit(
      `&(executable="/bin/sh")(arguments="-c" "setsid sh -c 'sleep 300 &' </dev/null >/dev/null 2>&1; env -i setsid sh -c 'sleep 301 &' </dev/null >/dev/null 2>&1; sleep 1")`,
    );
    expect(s.id, s.body).toBeTruthy();
    await first.waitState(s.id!, ["RUNNING", "FINISHED"]);
    expect(await first.waitState(s.id!, ["FINISHED", "FAILED"])).toBe("FINISHED");
    await until("no process of the account", () => procs() === "", 10_000).catch((e: Error) => {
      throw new Error(
        `${e.message}: ${spawnSync("ps", ["-o", "pid,args", "-u", acct], { encoding: "utf8" }).stdout}\n${stack
          .logs()
          .split("\n")
          .filter((l) => /contain|cgroup|lrms/.test(l))
          .slice(-20)
          .join("\n")}`,
      );
    });
    ids.daemon = s.id!;
  }, 120_000);

  it("the lease stays while anything of the account remains; the next identity gets it once it is clean", async () => {
    // Left by the last holder outside any job (as cron or at would start it), and a file root cannot remove yet.
    spawn("runuser", ["-u", acct, "--", "setsid", "sleep", "302"], { detached: true, stdio: "ignore" }).unref();
    spawnSync("runuser", ["-u", acct, "--", "sh", "-c", `echo x > ${stuckFile}`]);
    const immutable = spawnSync("chattr", ["+i", stuckFile]).status === 0;
    await until("the outside process runs", () => procs() !== "");
    expect(first.clean(ids.daemon)).toBe(201);
    // The process is gone (ended by the scrub of the clean), the file is not: the lease is kept.
    await until("the outside process ended by the scrub", () => procs() === "", 30_000);
    if (immutable) {
      const refused = second.submit(`&(executable="/bin/true")`);
      expect(refused.id, refused.body).toBeUndefined();
      expect(refused.body).toMatch(/POOL_EXHAUSTED|every account/);
      spawnSync("chattr", ["-i", stuckFile]);
    }
    await until("the lease released", () => spawnSync("test", ["-e", stuckFile]).status !== 0, 30_000);
    const next = second.submit(`&(executable="/bin/sh")(arguments="-c" "id -un > who.txt")(outputfiles=("who.txt" ""))`);
    expect(next.id, next.body).toBeTruthy();
    expect(await second.waitState(next.id!, ["FINISHED", "FAILED"])).toBe("FINISHED");
  }, 120_000);

  it('sleep 120 with a 1-minute walltime ends FAILED with "walltime exceeded"', async () => {
    const s = second.submit(`&(executable="/bin/sleep")(arguments="120")(walltime="1")`);
    expect(s.id, s.body).toBeTruthy();
    const t0 = Date.now();
    expect(await second.waitState(s.id!, ["FINISHED", "FAILED", "KILLED"], 60_000)).toBe("FAILED");
    expect(Date.now() - t0).toBeLessThan(45_000);
    expect(second.info(s.id!)).toMatch(/Walltime exceeded/);
    await until("no process of the account", () => procs() === "", 10_000);
  }, 90_000);
});

const ids: { daemon: string } = { daemon: "" };
