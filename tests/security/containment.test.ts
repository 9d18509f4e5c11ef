/**
 * Containment, limits kept and clean pool accounts (docs/fork-containment.md), against a whole CE (JEM as root, fork, a pool of
 * one account, useradd; root only): a job's setsid double-forked daemon ends with the job; a pool
 * account with anything of its last holder left (a process started outside any job, a file that
 * cannot be removed) is not handed to the next identity, which is refused until the account is
 * clean; `sleep 120` with a 1-minute walltime ends FAILED with "walltime exceeded" (limits scaled
 * by lrms.fork.timeLimitScale: the description keeps its minutes).
 */
import { spawn, spawnSync } from "node:child_process";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { TestAccounts } from "@ce/mapping/testing";
import { startStack, type Stack } from "@ce/testing/stack";
import { waitFor } from "@ce/testing";
import { issueStackUser, stackClient, type StackUser } from "@ce/testing/stack-client";

const ROOT = TestAccounts.available();

const issue = issueStackUser;

/** The stack's REST interface as one user (the status poll every 300 ms). */
function client(stack: Stack, cred: StackUser) {
  const c = stackClient(stack, cred);
  return {
    submit: (xrsl: string) => {
      const r = c.submit(xrsl);
      return { ...(r.id ? { id: r.id } : {}), body: `${r.status} ${r.body}` };
    },
    state: c.state,
    info: (id: string) => c.action("info", id).body,
    clean: (id: string) => c.action("clean", id).status,
    waitState: (id: string, want: string[], ms = 90_000) => c.waitState(id, want, ms, 300),
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
