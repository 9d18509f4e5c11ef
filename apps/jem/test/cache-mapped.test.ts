import { chmod, lstat, mkdtemp, readFile, readlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { lookupAccounts } from "@ce/mapping";
import type { LocalUser } from "@ce/model";
import { TestAccounts } from "@ce/mapping/testing";
import type { Jem } from "../src/daemon.js";
import { dataPath, findEntry } from "../src/priv/rootfs-cache.js";
import { cleanDir } from "../src/staging/cache/cleaner.js";
import { urlHash } from "../src/staging/cache/policy.js";
import { OWNER, output, shellJob, submitTestJob, testEnv, testJem, waitFor, waitForRest, type TestEnv } from "./helpers.js";
import { startOrigin, type Origin } from "@ce/testing/origin";
import { testPki, type TestPki } from "@ce/testing/storage";

// The input cache with mapping on: jobs run as a real account and get a link to a root-owned file.
const ROOT = TestAccounts.available();

describe.skipIf(!ROOT)("cached inputs of jobs that run as mapped accounts", () => {
  const accounts = new TestAccounts();
  let env: TestEnv;
  let jem: Jem;
  let origin: Origin;
  let pki: TestPki;
  let cacheDir: string;
  let localUser: LocalUser;
  let delegation: string;

  beforeAll(async () => {
    const acct = await accounts.add("ch");
    const a = (await lookupAccounts([acct])).get(acct)!;
    localUser = { account: acct, uid: a.uid, gid: a.gid, groups: [a.gid], rule: "mapping.rules[0]" };
    pki = testPki();
    origin = await startOrigin(pki);
    const caFile = join(await mkdtemp(join(tmpdir(), "jem-ca-")), "ca.pem");
    await writeFile(caFile, pki.ca.certPem);
    const base = await mkdtemp(join(tmpdir(), "jem-cache-"));
    await chmod(base, 0o711);
    cacheDir = join(base, "c");
    env = await testEnv({
      mapping: { rules: [{ name: "test", match: ["*"], user: acct }] },
      staging: { caFile, cache: { dirs: [{ path: cacheDir }], cleanIntervalSeconds: 3600 } },
    });
    await chmod(env.stateDir, 0o711); // mapped accounts reach their session dirs by path
    delegation = await env.delegations.create(OWNER, "x509", { privateKeyPem: pki.proxy.keyPem });
    await env.delegations.storeProxy(delegation, OWNER, pki.proxy.filePem, Date.now() + 3_600_000, pki.proxy.chainPem);
    jem = await testJem(env);
  }, 60_000);
  afterAll(async () => {
    await jem?.stop();
    await env?.close();
    await origin?.close();
    await accounts.remove();
  });

  const submit = (path: string, script: string) =>
    submitTestJob(
      env,
      shellJob(script, {
        inputFiles: [{ name: "in.dat", source: `${origin.url}${path}`, executable: false, options: { cache: "yes" } }],
        outputFiles: [output("result.txt")],
      }),
      { mainDelegation: delegation, delegations: [delegation], localUser },
    );

  it("the job reads its cached input and cannot change the cached bytes", async () => {
    origin.files.set("/data/ro.dat", Buffer.from("pristine\n"));
    const script = [
      "id -u > result.txt",
      "cat in.dat >> result.txt",
      "if echo evil >> in.dat 2>/dev/null; then echo WROTE >> result.txt; else echo REFUSED >> result.txt; fi",
      'if chmod 666 "$(readlink in.dat)" 2>/dev/null; then echo CHMOD >> result.txt; else echo NOCHMOD >> result.txt; fi',
      'if echo evil >> "$(readlink in.dat)" 2>/dev/null; then echo WROTE2 >> result.txt; else echo REFUSED2 >> result.txt; fi',
    ].join("; ");
    const id = await submit("/data/ro.dat", script);
    const r = await waitForRest(env, id, ["FINISHED", "FAILED"], 60_000);
    expect(r?.failure).toBeUndefined();
    const out = await readFile(join(env.control.sessionDir(id), "result.txt"), "utf8");
    expect(out).toBe(`${localUser.uid}\npristine\nREFUSED\nNOCHMOD\nREFUSED2\n`);
    const data = dataPath(cacheDir, urlHash(`${origin.url}/data/ro.dat`));
    expect(await readFile(data, "utf8")).toBe("pristine\n");
    const st = await lstat(data);
    expect([st.uid, st.mode & 0o777]).toEqual([0, 0o644]); // the session hand-over did not touch it
    // A second job of the same user: the same bytes, no second GET.
    const id2 = await submit("/data/ro.dat", "cat in.dat > result.txt");
    expect((await waitForRest(env, id2, ["FINISHED", "FAILED"], 60_000))?.failure).toBeUndefined();
    expect(await readFile(join(env.control.sessionDir(id2), "result.txt"), "utf8")).toBe("pristine\n");
    expect(origin.count("GET", "/data/ro.dat")).toBe(1);
  }, 90_000);

  it("the cleaner keeps usage under the high watermark and never removes a running job's input", async () => {
    origin.files.set("/data/old1.dat", Buffer.alloc(4000, 1));
    origin.files.set("/data/old2.dat", Buffer.alloc(4000, 2));
    origin.files.set("/data/busy.dat", Buffer.alloc(4000, 3));
    for (const p of ["/data/old1.dat", "/data/old2.dat"]) {
      expect((await waitForRest(env, await submit(p, "cat in.dat > result.txt"), ["FINISHED", "FAILED"], 60_000))?.failure).toBeUndefined();
    }
    // A running job: it waits for a go file, then reads its input.
    const busy = await submit("/data/busy.dat", "while [ ! -e go ]; do sleep 0.1; done; cat in.dat | wc -c > result.txt");
    await waitForRest(env, busy, ["RUNNING"], 60_000);
    const session = env.control.sessionDir(busy);
    expect((await lstat(join(session, "in.dat"))).isSymbolicLink()).toBe(true);
    expect(await readlink(join(session, "in.dat"))).toContain(`/joblinks/${busy}/`);
    // High watermark below one file: everything unused goes, the running job's input stays.
    const ctx = {
      ...jem.ctx,
      config: {
        ...env.config,
        staging: { ...env.config.staging, cache: { ...env.config.staging.cache, highWatermarkBytes: 3000, lowWatermarkBytes: 0 } },
      },
    };
    const report = await cleanDir(ctx, { path: cacheDir, drain: false, readonly: false });
    expect(report.inUse).toBe(1);
    for (const p of ["/data/old1.dat", "/data/old2.dat", "/data/ro.dat"])
      expect(await findEntry(cacheDir, urlHash(`${origin.url}${p}`))).toBeUndefined();
    expect(await findEntry(cacheDir, urlHash(`${origin.url}/data/busy.dat`))).toBeDefined();
    expect(report.bytes).toBe(4000); // only what a running job holds
    await writeFile(join(session, "go"), "");
    const r = await waitForRest(env, busy, ["FINISHED", "FAILED"], 60_000);
    expect(r?.failure).toBeUndefined();
    expect((await readFile(join(session, "result.txt"), "utf8")).trim()).toBe("4000");
    // Once the job is finished its links go, and its file is an ordinary candidate again.
    await waitFor("finished", async () => (await env.jobs.get(busy))?.state === "FINISHED");
    const after = await cleanDir(ctx, { path: cacheDir, drain: false, readonly: false });
    expect(after.jobLinksRemoved).toBeGreaterThanOrEqual(1);
    expect(after.bytes).toBeLessThanOrEqual(3000);
  }, 120_000);
});
