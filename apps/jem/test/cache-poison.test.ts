import { chmod, link, lstat, mkdtemp, readdir, readFile, writeFile } from "node:fs/promises";
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
import { OWNER, output, sendCommand, shellJob, submitTestJob, testEnv, testJem, waitFor, waitForRest, type TestEnv } from "./helpers.js";
import { startOrigin, type Origin } from "@ce/testing/origin";
import { testPki, type TestPki } from "@ce/testing/storage";

/**
 * Issue 33, part 3: one user poisoning another's cached input through a rerun. The attack: the
 * job moves its hard link of the cached file out of `joblinks/<id>/` into its session, fails,
 * is restarted, and the hand-over of the session (a `chown -R` as root) gave the cached file to
 * the attacker's account, who rewrote it for every later user of the URL; the moved link also
 * pinned the entry against the cleaner. Jobs run as real accounts through the JEM (mapping on).
 */
const ROOT = TestAccounts.available();
const VICTIM = "/DC=org/DC=test/CN=Victim User";

// First run: try to move the cache link into the session, fail. Rerun: try to write every name
// of the cached file the session holds.
const ATTACK = [
  "if [ -e ran-once ]; then",
  "  for f in stolen.dat planted.dat; do [ -e $f ] || continue;",
  "    if (printf POISONED > $f) 2>/dev/null; then echo WROTE $f; else echo REFUSED $f; fi; done > result.txt",
  "  exit 0",
  "fi",
  "touch ran-once",
  'if mv "$(readlink in.dat)" stolen.dat 2>/dev/null; then echo MOVED; else echo NOMOVE; fi > moved.txt',
  "exit 1",
].join("\n");

describe.skipIf(!ROOT)("a job cannot change a cached input through its links (move, fail, restart)", () => {
  const accounts = new TestAccounts();
  let env: TestEnv;
  let jem: Jem;
  let origin: Origin;
  let pki: TestPki;
  let cacheDir: string;
  let attacker: LocalUser;
  let victim: LocalUser;
  let delegA: string;
  let delegV: string;

  const userOf = async (name: string): Promise<LocalUser> => {
    const acct = await accounts.add(name);
    const a = (await lookupAccounts([acct])).get(acct)!;
    return { account: acct, uid: a.uid, gid: a.gid, groups: [a.gid], rule: "mapping.rules[0]" };
  };

  beforeAll(async () => {
    attacker = await userOf("pa");
    victim = await userOf("pv");
    pki = testPki();
    origin = await startOrigin(pki);
    const caFile = join(await mkdtemp(join(tmpdir(), "jem-ca-")), "ca.pem");
    await writeFile(caFile, pki.ca.certPem);
    const base = await mkdtemp(join(tmpdir(), "jem-cache-"));
    await chmod(base, 0o711);
    cacheDir = join(base, "c");
    env = await testEnv({
      mapping: {
        rules: [
          { name: "attacker", match: [`dn:${OWNER}`], user: attacker.account },
          { name: "victim", match: [`dn:${VICTIM}`], user: victim.account },
        ],
      },
      staging: { caFile, cache: { dirs: [{ path: cacheDir }], cleanIntervalSeconds: 3600 } },
    });
    await chmod(env.stateDir, 0o711); // mapped accounts reach their session dirs by path
    const deleg = async (owner: string) => {
      const id = await env.delegations.create(owner, "x509", { privateKeyPem: pki.proxy.keyPem });
      await env.delegations.storeProxy(id, owner, pki.proxy.filePem, Date.now() + 3_600_000, pki.proxy.chainPem);
      return id;
    };
    delegA = await deleg(OWNER);
    delegV = await deleg(VICTIM);
    jem = await testJem(env);
  }, 60_000);
  afterAll(async () => {
    await jem?.stop();
    await env?.close();
    await origin?.close();
    await accounts.remove();
  });

  const submit = (path: string, script: string, who: "attacker" | "victim", outputs: string[], rerun = 0) =>
    submitTestJob(
      env,
      shellJob(script, {
        rerun,
        inputFiles: [{ name: "in.dat", source: `${origin.url}${path}`, executable: false, options: { cache: "yes" } }],
        outputFiles: outputs.map((o) => output(o)),
      }),
      who === "attacker"
        ? { owner: OWNER, mainDelegation: delegA, delegations: [delegA], localUser: attacker }
        : { owner: VICTIM, mainDelegation: delegV, delegations: [delegV], localUser: victim },
    );
  const read = (id: string, name: string) => readFile(join(env.control.sessionDir(id), name), "utf8").catch(() => undefined);
  /** Every file in the cache's data tree: root's, 0644. */
  const dataOwners = async () => {
    const out: string[] = [];
    for (const sub of await readdir(join(cacheDir, "data"))) {
      for (const f of await readdir(join(cacheDir, "data", sub))) {
        const st = await lstat(join(cacheDir, "data", sub, f));
        if (!f.endsWith(".meta")) out.push(`${st.uid}:${(st.mode & 0o7777).toString(8)}`);
      }
    }
    return out;
  };
  /** A cleaner pass that must remove every entry no running job links. */
  const evictAll = () =>
    cleanDir(
      {
        ...jem.ctx,
        config: {
          ...env.config,
          staging: { ...env.config.staging, cache: { ...env.config.staging.cache, highWatermarkBytes: 1, lowWatermarkBytes: 0 } },
        },
      },
      { path: cacheDir, drain: false, readonly: false },
    );

  /** The attacker's job through its first run (failed) and, after `between`, its restart to the end. */
  async function attack(path: string, between: (id: string) => Promise<void> = async () => undefined) {
    const id = await submit(path, ATTACK, "attacker", ["ran-once", "moved.txt", "stolen.dat", "planted.dat", "result.txt"], 1);
    const failed = await waitForRest(env, id, ["FAILED", "FINISHED"], 60_000);
    expect(failed?.rest).toBe("FAILED");
    const link = (await readdir(join(cacheDir, "joblinks", id)))[0]!;
    const jl = await lstat(join(cacheDir, "joblinks", id));
    await between(id);
    await sendCommand(env, "restart", id);
    const done = await waitFor(
      "the rerun's end",
      async () => {
        const j = await env.jobs.get(id);
        return j && j.rerun === 0 && (j.rest === "FINISHED" || j.rest === "FAILED") ? j : undefined;
      },
      60_000,
    );
    await waitForRest(env, id, done.rest, 10_000);
    return { id, link, joblinks: jl };
  }

  it("the move is refused; the rerun changes nothing; the next user reads the origin's bytes; the entry can go", async () => {
    origin.files.set("/data/shared.dat", Buffer.from("genuine\n"));
    const { id, link, joblinks } = await attack("/data/shared.dat");
    // joblinks/<id> is root's and only traversable: the job could not rename its link out of it.
    expect([joblinks.uid, joblinks.mode & 0o7777]).toEqual([0, 0o711]);
    expect(link).toMatch(new RegExp(`^${urlHash(`${origin.url}/data/shared.dat`)}\\.[0-9a-f]{32}$`));
    expect(await read(id, "moved.txt")).toBe("NOMOVE\n");
    expect(await read(id, "result.txt")).toBe(""); // nothing of the cache in the session to write
    const data = dataPath(cacheDir, urlHash(`${origin.url}/data/shared.dat`));
    expect(await readFile(data, "utf8")).toBe("genuine\n");
    expect(await dataOwners()).toEqual(expect.arrayContaining(["0:644"]));
    expect((await dataOwners()).every((o) => o === "0:644")).toBe(true);

    // Another user of the same URL gets the origin's bytes (from the cache: one GET so far).
    const v = await submit("/data/shared.dat", "cat in.dat > result.txt", "victim", ["result.txt"]);
    expect((await waitForRest(env, v, ["FINISHED", "FAILED"], 60_000))?.failure).toBeUndefined();
    expect(await read(v, "result.txt")).toBe("genuine\n");
    expect(origin.count("GET", "/data/shared.dat")).toBe(1);

    // Both jobs are over: nothing pins the entry, the cleaner removes it.
    const report = await evictAll();
    expect(report.inUse).toBe(0);
    expect(await findEntry(cacheDir, urlHash(`${origin.url}/data/shared.dat`))).toBeUndefined();
  }, 180_000);

  it("a name of the cached file left in a session (an older JEM, no protected_hardlinks) is never handed over and pins nothing", async () => {
    origin.files.set("/data/planted.dat", Buffer.from("genuine too\n"));
    const data = dataPath(cacheDir, urlHash(`${origin.url}/data/planted.dat`));
    // Between the failure and the restart a hard link of the cached file appears in the session.
    const { id } = await attack("/data/planted.dat", (job) => link(data, join(env.control.sessionDir(job), "planted.dat")));
    expect(await read(id, "result.txt")).toBe("REFUSED planted.dat\n");
    const st = await lstat(data);
    expect([st.uid, st.gid, st.mode & 0o7777]).toEqual([0, 0, 0o644]);
    expect(await readFile(data, "utf8")).toBe("genuine too\n");

    const v = await submit("/data/planted.dat", "cat in.dat > result.txt", "victim", ["result.txt"]);
    expect((await waitForRest(env, v, ["FINISHED", "FAILED"], 60_000))?.failure).toBeUndefined();
    expect(await read(v, "result.txt")).toBe("genuine too\n");

    // The session's name keeps the link count above 1, but no running job links the entry: it goes.
    expect((await lstat(data)).nlink).toBeGreaterThan(1);
    await evictAll();
    expect(await findEntry(cacheDir, urlHash(`${origin.url}/data/planted.dat`))).toBeUndefined();
    expect(await read(id, "planted.dat")).toBe("genuine too\n"); // the job's own name still reads
  }, 180_000);
});
