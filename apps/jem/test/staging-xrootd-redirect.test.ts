/**
 * Redirects of a hostile xrootd server, with real xrdcp/xrdfs and a JEM that runs as root and jobs
 * as a mapped account. The server answers every request with a redirect the test chooses (a
 * `file://` URL, a bare local path, a loopback address the policy refuses): nothing of a root-only
 * file reaches the job, no file is written by root, a refused address never gets a connection,
 * and the input cache's access check and fill are held to the same. A real xrootd redirector in
 * front of a real data server still works (both ways), the hop followed and checked by us.
 */
import { chmod, lstat, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { lookupAccounts } from "@ce/mapping";
import { TestAccounts } from "@ce/mapping/testing";
import type { LocalUser } from "@ce/model";
import type { Jem } from "../src/daemon.js";
import { output, shellJob, submitTestJob, testEnv, testJem, waitForRest, type TestEnv } from "./helpers.js";
import { haveXrootd, startXrootd, type Xrootd } from "@ce/testing/xrootd";
import { startCountingListener, startHostileXrootd, type HostileXrootd } from "@ce/testing/xrootd-hostile";

const RUN = haveXrootd() && TestAccounts.available();

describe.skipIf(!RUN)("xrootd redirects are untrusted", () => {
  const accounts = new TestAccounts();
  let env: TestEnv;
  let jem: Jem;
  let hostile: HostileXrootd;
  let listener: Awaited<ReturnType<typeof startCountingListener>>;
  /** Stands for the CE's own gateway: refused although the policy opens 127.0.0.1. */
  let ownGateway: Awaited<ReturnType<typeof startCountingListener>>;
  let data: Xrootd;
  let redirector: Xrootd;
  let localUser: LocalUser;
  let secretDir: string;
  let secret: string;
  let cacheDir: string;
  let cacheBase: string;

  beforeAll(async () => {
    const acct = await accounts.add("xr");
    const a = (await lookupAccounts([acct])).get(acct)!;
    localUser = { account: acct, uid: a.uid, gid: a.gid, groups: [a.gid], rule: "mapping.rules[0]" };
    // What root can read and write and the job's account cannot: a 0700 dir with a 0600 file.
    secretDir = await mkdtemp(join(tmpdir(), "jem-root-only-"));
    await chmod(secretDir, 0o700);
    secret = join(secretDir, "delegation.key");
    await writeFile(secret, "ROOT-ONLY-SECRET\n", { mode: 0o600 });
    hostile = await startHostileXrootd({ info: `file://localhost${secret}`, port: 0 });
    // 127.0.0.2 is loopback too; the policy below opens 127.0.0.1 only (the servers' address).
    listener = await startCountingListener("127.0.0.2");
    ownGateway = await startCountingListener("127.0.0.1");
    data = await startXrootd();
    redirector = await startXrootd({ redirectTo: `localhost:${data.port}` });
    cacheBase = await mkdtemp(join(tmpdir(), "jem-xrd-cache-"));
    await chmod(cacheBase, 0o711);
    cacheDir = join(cacheBase, "c");
    env = await testEnv({
      gateway: { host: "127.0.0.1", port: ownGateway.port },
      mapping: { rules: [{ name: "test", match: ["*"], user: acct }] },
      staging: {
        maxRetries: 0,
        retryBaseMs: 20,
        allowNetworks: ["127.0.0.1/32"],
        cache: { dirs: [{ path: cacheDir }], cleanIntervalSeconds: 3600 },
      },
    });
    await chmod(env.stateDir, 0o711); // mapped accounts reach their session dirs by path
    jem = await testJem(env);
  }, 60_000);
  afterAll(async () => {
    await jem?.stop();
    await env?.close();
    await hostile?.close();
    await listener?.close();
    await ownGateway?.close();
    await data?.close();
    await redirector?.close();
    await accounts.remove();
    for (const d of [secretDir, cacheBase]) if (d) await rm(d, { recursive: true, force: true });
  });

  // Not through the input cache unless asked (cache: "yes"): the plain xrdcp download.
  const input = (source: string, options: Record<string, string> = { cache: "no" }) =>
    submitTestJob(
      env,
      shellJob("cat in.dat > copy.txt 2>/dev/null; true", {
        inputFiles: [{ name: "in.dat", source, executable: false, options }],
        outputFiles: [output("copy.txt")],
      }),
      { localUser },
    );

  /** Every regular file under `dir` whose content holds the secret. */
  const leaks = async (dir: string): Promise<string[]> => {
    const found: string[] = [];
    for (const e of await readdir(dir, { recursive: true, withFileTypes: true }).catch(() => [])) {
      if (!e.isFile()) continue;
      const p = join(e.parentPath, e.name);
      if ((await readFile(p, "utf8").catch(() => "")).includes("ROOT-ONLY-SECRET")) found.push(p);
    }
    return found;
  };

  it("a redirect to file://localhost/<root-only file> or to a bare path leaks nothing into the job; the reason says why", async () => {
    for (const info of [`file://localhost${secret}`, secret]) {
      hostile.redirect = { info, port: 0 };
      const id = await input(`${hostile.url}//store/evnt.root`);
      const r = await waitForRest(env, id, ["FINISHED", "FAILED"], 40_000);
      expect(r?.rest).toBe("FAILED");
      expect(r?.failure).toMatch(
        /in\.dat: root:\/\/localhost:\d+\/\/store\/evnt\.root redirected to ".*delegation\.key", refused: a local file/,
      );
      expect(await leaks(env.control.sessionDir(id))).toEqual([]);
    }
  }, 90_000);

  it("an output sent to the hostile server writes no file anywhere (redirect into a root-only 0700 dir)", async () => {
    hostile.redirect = { info: `file://localhost${join(secretDir, "cron-job")}`, port: 0 };
    const id = await submitTestJob(
      env,
      shellJob("echo '* * * * * root touch /tmp/pwned' > out.txt", {
        outputFiles: [output("out.txt", { target: `${hostile.url}//store/out.txt` })],
      }),
      { localUser },
    );
    const r = await waitForRest(env, id, ["FINISHED", "FAILED"], 40_000);
    expect(r?.rest).toBe("FAILED");
    expect(r?.failure).toMatch(/redirected to ".*cron-job", refused: a local file/);
    expect((await readdir(secretDir)).sort()).toEqual(["delegation.key"]);
  }, 60_000);

  it("a redirect to a loopback address the policy refuses, or to the CE's own listener, never connects (download, cache fill)", async () => {
    const cases = [
      { info: `root://127.0.0.2:${listener.port}`, port: 0, name: "a.root", options: { cache: "no" }, answerStat: false },
      // The cache's access check answered: the fill's open is the one redirected.
      { info: `root://127.0.0.2:${listener.port}`, port: 0, name: "b.root", options: { cache: "yes" }, answerStat: true },
      { info: "127.0.0.2", port: listener.port, name: "c.root", options: { cache: "no" }, answerStat: false },
    ];
    for (const c of cases) {
      hostile.redirect = { info: c.info, port: c.port };
      hostile.answerStat = c.answerStat;
      const id = await input(`${hostile.url}//store/${c.name}`, c.options);
      const r = await waitForRest(env, id, ["FINISHED", "FAILED"], 40_000);
      expect(r?.rest).toBe("FAILED");
      expect(r?.failure).toMatch(/redirected to root:\/\/127\.0\.0\.2:\d+\/\/store\/[abc]\.root, refused: 127\.0\.0\.2 is loopback/);
    }
    hostile.answerStat = false;
    expect(listener.connections()).toBe(0);
    // root://127.0.0.1:<port>: loopback the site opened, but the CE's own listener.
    hostile.redirect = { info: `root://127.0.0.1:${ownGateway.port}`, port: 0 };
    const id = await input(`${hostile.url}//store/d.root`);
    const r = await waitForRest(env, id, ["FINISHED", "FAILED"], 40_000);
    expect(r?.failure).toMatch(
      /redirected to root:\/\/127\.0\.0\.1:\d+\/\/store\/d\.root, refused: 127\.0\.0\.1:\d+ is this CE's own gateway listener/,
    );
    expect(ownGateway.connections()).toBe(0);
  }, 90_000);

  it("the input cache's access check and its fill never read what a file:// redirect names", async () => {
    hostile.redirect = { info: `file://localhost${secret}`, port: 0 };
    // First the access check (xrdfs stat) is redirected, then (stat answered) the fill's open.
    for (const answerStat of [false, true]) {
      hostile.answerStat = answerStat;
      const id = await input(`${hostile.url}//store/cached-${answerStat}.root`, { cache: "yes" });
      const r = await waitForRest(env, id, ["FINISHED", "FAILED"], 40_000);
      expect(r?.rest).toBe("FAILED");
      expect(r?.failure).toMatch(/redirected to ".*delegation\.key", refused: a local file/);
      expect(await leaks(cacheDir)).toEqual([]);
      expect(await leaks(env.control.sessionDir(id))).toEqual([]);
    }
    hostile.answerStat = false;
  }, 60_000);

  it("a real redirector in front of a real data server: download and upload follow the checked hop, as the job's account", async () => {
    await mkdir(join(data.dataDir, "in"), { recursive: true });
    await writeFile(join(data.dataDir, "in", "evnt.root"), "behind a redirector\n");
    // Wrappers first in PATH (the tools get the JEM's PATH) record who runs xrdcp and xrdfs.
    const bin = await mkdtemp(join(tmpdir(), "jem-xrd-who-"));
    await chmod(bin, 0o755);
    const who = join(bin, "who");
    await writeFile(who, "");
    await chmod(who, 0o666);
    for (const tool of ["xrdcp", "xrdfs"]) {
      await writeFile(join(bin, tool), `#!/bin/sh\necho "${tool} $(id -u)" >> ${who}\nexec /usr/bin/${tool} "$@"\n`);
      await chmod(join(bin, tool), 0o755);
    }
    const path = process.env.PATH;
    process.env.PATH = `${bin}:${path ?? "/usr/bin:/bin"}`;
    const id = await submitTestJob(
      env,
      shellJob("cp evnt.root copy.txt; echo result > HITS.1", {
        inputFiles: [{ name: "evnt.root", source: `${redirector.url}//in/evnt.root`, executable: false, options: {} }],
        outputFiles: [output("copy.txt"), output("HITS.1", { target: `${redirector.url}//out/HITS.1` })],
      }),
      { localUser },
    );
    const r = await waitForRest(env, id, ["FINISHED", "FAILED"], 40_000);
    process.env.PATH = path;
    expect(r?.failure).toBeUndefined();
    expect(await readFile(join(env.control.sessionDir(id), "copy.txt"), "utf8")).toBe("behind a redirector\n");
    // Each hop is a run: the redirector's answer, then the data server, for the input and the output.
    const runs = (await readFile(who, "utf8")).trim().split("\n");
    expect(runs.filter((l) => l.startsWith("xrdcp")).length).toBe(4);
    expect(new Set(runs.map((l) => l.split(" ")[1]))).toEqual(new Set([String(localUser.uid)]));
    await rm(bin, { recursive: true, force: true });
    expect(await readFile(join(data.dataDir, "out", "HITS.1"), "utf8")).toBe("result\n");
    // The redirector never stored it itself.
    expect(await lstat(join(redirector.dataDir, "out", "HITS.1")).catch(() => undefined)).toBeUndefined();
  }, 60_000);
});
