import { chmod, lstat, mkdir, readFile, stat, writeFile } from "node:fs/promises";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { lookupAccounts } from "@ce/mapping";
import type { LocalUser } from "@ce/model";
import { defaultRte, enableRte, setRteParams, type RteConfig } from "@ce/store";
import { TestAccounts } from "@ce/mapping/testing";
import type { Jem } from "../src/daemon.js";
import { OWNER, output, shellJob, submitTestJob, testEnv, testJem, waitFor, waitForRest, type TestEnv } from "./helpers.js";

// The JEM's side of ENV/TOKEN on the fork back end with a real mapped account: the site's default
// ENV/TOKEN on a job without a token says so in the job's errors; the token file stays in the
// session when the job runs in node-local scratch (ENV/LRMS-SCRATCH), where a renewal replaces it;
// a link the job puts in the token file's place is replaced, never written through (root writes it).
// tests/tokens/token-jobs.test.ts runs the whole CE on fork, Slurm and Grid Engine.

const ROOT = process.getuid?.() === 0;
const HAS_SCRATCH_RTE = existsSync("/usr/share/arc/rte/ENV/LRMS-SCRATCH");
if (!ROOT) console.warn("token-rte.test.ts SKIPPED: needs root (a mapped account)");

describe.skipIf(!ROOT)("ENV/TOKEN in the JEM (fork, mapping on)", () => {
  const accounts = new TestAccounts();
  let env: TestEnv;
  let jem: Jem;
  let localUser: LocalUser;
  let rte: RteConfig;

  beforeAll(async () => {
    const acct = await accounts.add("tr");
    const a = (await lookupAccounts([acct])).get(acct)!;
    localUser = { account: acct, uid: a.uid, gid: a.gid, groups: [a.gid], rule: "mapping.rules[0]" };
    env = await testEnv({ mapping: { rules: [{ name: "test", match: ["*"], user: acct }] } });
    await chmod(env.stateDir, 0o711);
    rte = {
      paths: { controlDir: env.config.paths.controlDir, rteDir: env.config.paths.rteDir },
      jobs: { runtimeEnvironments: [], defaultRuntimeEnvironments: [] },
    };
    defaultRte(rte, "ENV/TOKEN"); // every job gets it, token or not
    if (HAS_SCRATCH_RTE) {
      enableRte(rte, "ENV/LRMS-SCRATCH");
      setRteParams(rte, "ENV/LRMS-SCRATCH", ["SCRATCH_VAR=NODE_SCRATCH"]);
    }
    jem = await testJem(env);
  }, 60_000);

  afterAll(async () => {
    await jem?.stop();
    await env?.close();
    await accounts.remove();
  });

  const tokenJob = async (token: string, script: string, extra: Parameters<typeof shellJob>[1] = {}) => {
    const deleg = await env.delegations.create(OWNER, "jwt", { token });
    const id = await submitTestJob(
      env,
      shellJob(script, {
        stdout: "out.txt",
        stderr: "err.txt",
        outputFiles: ["out.txt", "err.txt", "where.txt"].map((f) => output(f)),
        ...extra,
      }),
      { localUser, delegations: [deleg], mainDelegation: deleg },
    );
    await env.delegations.bind([deleg], [id]); // as the gateway does after the commit
    return { id, deleg };
  };
  const session = (id: string, name: string) => join(env.control.sessionDir(id), name);

  it("a site-default ENV/TOKEN on a job without a token: the job runs, its errors say why there is no BEARER_TOKEN_FILE", async () => {
    const id = await submitTestJob(
      env,
      shellJob('echo "[${BEARER_TOKEN_FILE-unset}]"', { stdout: "out.txt", outputFiles: [output("out.txt")] }),
      { localUser },
    );
    const r = await waitForRest(env, id, ["FINISHED", "FAILED"], 30_000);
    expect(r?.failure).toBeUndefined();
    expect(await readFile(session(id, "out.txt"), "utf8")).toBe("[unset]\n");
    expect(await env.control.read(id, "errors")).toContain(
      "ENV/TOKEN: the job has no token delegation (X-Token-Delegation), so BEARER_TOKEN_FILE is not set",
    );
  }, 40_000);

  it.skipIf(!HAS_SCRATCH_RTE)(
    "in node-local scratch the token stays in the session, where the renewal replaces it",
    async () => {
      const scratch = join(env.stateDir, "node-scratch");
      await mkdir(scratch, { mode: 0o1777 });
      await chmod(scratch, 0o1777);
      const { id, deleg } = await tokenJob(
        "T1",
        [
          'echo "$PWD $BEARER_TOKEN_FILE" > where.txt',
          'i=0; while [ $i -lt 60 ] && [ "$(cat "$BEARER_TOKEN_FILE")" != T2 ]; do sleep 0.5; i=$((i+1)); done',
          'cat "$BEARER_TOKEN_FILE"; echo',
        ].join("\n"),
        { runtimeEnvironments: [{ name: "ENV/LRMS-SCRATCH", options: [] }], environment: [{ name: "NODE_SCRATCH", value: scratch }] },
      );
      await waitForRest(env, id, ["RUNNING"], 20_000);
      const file = session(id, ".bearer_token");
      await waitFor("the token file", async () => existsSync(file), 10_000);
      expect(await readFile(file, "utf8")).toBe("T1");
      await env.delegations.storeToken(deleg, OWNER, "T2");
      const r = await waitForRest(env, id, ["FINISHED", "FAILED"], 40_000);
      expect(r?.failure, await readFile(session(id, "err.txt"), "utf8").catch(() => "")).toBeUndefined();
      expect(await readFile(session(id, "out.txt"), "utf8")).toBe("T2\n");
      // It ran in scratch (the session's files came back), with BEARER_TOKEN_FILE in the session.
      expect(await readFile(session(id, "where.txt"), "utf8").catch(() => "")).toBe(`${join(scratch, id)} ${file}\n`);
      expect(existsSync(file)).toBe(false); // removed once the batch job was over
    },
    60_000,
  );

  it("a link the job puts where the token file is gets replaced by the renewed token, never written through", async () => {
    const target = join(env.stateDir, "root-owned.conf");
    await writeFile(target, "ROOT CONFIG\n", { mode: 0o644 });
    const { id, deleg } = await tokenJob(
      "T1",
      [
        'rm -f "$BEARER_TOKEN_FILE"; ln -s ' + target + ' "$BEARER_TOKEN_FILE"; touch planted',
        'i=0; while [ $i -lt 60 ] && [ -L "$BEARER_TOKEN_FILE" ]; do sleep 0.5; i=$((i+1)); done',
        'cat "$BEARER_TOKEN_FILE"; echo; stat -c "%a %u" "$BEARER_TOKEN_FILE"',
      ].join("\n"),
    );
    await waitFor("the job planted its link", async () => existsSync(session(id, "planted")), 20_000);
    expect((await lstat(session(id, ".bearer_token"))).isSymbolicLink()).toBe(true);
    await env.delegations.storeToken(deleg, OWNER, "T2-renewed");
    const r = await waitForRest(env, id, ["FINISHED", "FAILED"], 40_000);
    expect(r?.failure).toBeUndefined();
    expect(await readFile(session(id, "out.txt"), "utf8")).toBe(`T2-renewed\n600 ${localUser.uid}\n`);
    expect(await readFile(target, "utf8")).toBe("ROOT CONFIG\n");
    expect((await stat(target)).uid).toBe(0);
  }, 60_000);
});
