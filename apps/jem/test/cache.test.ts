import { mkdtemp, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createProxy, issueUserCert } from "@ce/x509/testing";
import { Keys } from "@ce/store";
import type { Jem } from "../src/daemon.js";
import { dataPath } from "../src/priv/rootfs-cache.js";
import { urlHash } from "../src/staging/cache/policy.js";
import { OWNER, output, shellJob, submitTestJob, testEnv, testJem, waitForRest, type TestEnv } from "./helpers.js";
import { killHard, spawnJem } from "./support/child.js";
import { startOrigin, type Origin } from "@ce/testing/origin";
import { testPki, type TestPki } from "@ce/testing/storage";
import { quietPeriod, waitFor } from "@ce/testing";

// The input cache with a real HTTPS origin on loopback, jobs as the CE (mapping off: copies).
let env: TestEnv;
let jem: Jem | undefined;
let origin: Origin;
let pki: TestPki;
let cacheDir: string;
const deleg = new Map<string, string>();
const OTHER = "/DC=org/DC=test/CN=Other User";

async function delegationOf(owner: string): Promise<string> {
  let id = deleg.get(owner);
  if (!id) {
    const cn = owner.split("CN=").pop()!;
    const user = owner === OWNER ? pki.user : issueUserCert(pki.ca, { dn: `/DC=org/DC=test/CN=${cn}` });
    const proxy = owner === OWNER ? pki.proxy : createProxy(user, user.key, { lifetimeSeconds: 3600 });
    id = await env.delegations!.create(owner, "x509", { privateKeyPem: proxy.keyPem });
    await env.delegations!.storeProxy(id, owner, proxy.filePem, Date.now() + 3_600_000, proxy.chainPem);
    deleg.set(owner, id);
  }
  return id;
}

async function job(path: string, cache: string | undefined, owner = OWNER): Promise<string> {
  const d = await delegationOf(owner);
  return submitTestJob(
    env,
    shellJob("cat in.dat > got.txt", {
      inputFiles: [{ name: "in.dat", source: `${origin.url}${path}`, executable: false, options: cache ? { cache } : {} }],
      outputFiles: [output("got.txt")],
    }),
    { owner, mainDelegation: d, delegations: [d] },
  );
}

const stats = async (id: string) => (await env.control.read(id, "statistics")) ?? "";

beforeAll(async () => {
  pki = testPki();
  origin = await startOrigin(pki);
  const caFile = join(await mkdtemp(join(tmpdir(), "jem-ca-")), "ca.pem");
  await writeFile(caFile, pki.ca.certPem);
  cacheDir = join(await mkdtemp(join(tmpdir(), "jem-cache-")), "c");
  env = await testEnv({
    staging: { caFile, maxConcurrentTransfers: 40, cache: { dirs: [{ path: cacheDir }], cleanIntervalSeconds: 3600 } },
  });
  jem = await testJem(env);
});
afterAll(async () => {
  await jem?.stop();
  await env?.close();
  await origin?.close();
});

describe("the input cache", () => {
  it("20 jobs naming one input with cache=yes: exactly one GET at the origin", async () => {
    origin.files.set("/data/yes.dat", Buffer.from("shared input\n"));
    const ids = await Promise.all(Array.from({ length: 20 }, () => job("/data/yes.dat", "yes")));
    for (const id of ids) {
      const r = await waitForRest(env, id, ["FINISHED", "FAILED"], 60_000);
      expect(r?.failure).toBeUndefined();
      expect(await readFile(join(env.control.sessionDir(id), "got.txt"), "utf8")).toBe("shared input\n");
    }
    expect(origin.count("GET", "/data/yes.dat")).toBe(1);
    const lines = await Promise.all(ids.map(stats));
    expect(lines.filter((l) => l.includes("fromcache=no")).length).toBe(1);
    expect(lines.filter((l) => l.includes("fromcache=yes")).length).toBe(19);
    // Visible to ceadm: hits and bytes saved, CE-wide.
    const st = await env.redis.hgetall(new Keys(env.config.redis.prefix).cacheStats());
    expect(Number(st.hits)).toBeGreaterThanOrEqual(19);
    expect(Number(st.bytesSaved)).toBeGreaterThanOrEqual(19 * 13);
    // The cached file: root's (the JEM's), 0644, under the URL's hash.
    const data = dataPath(cacheDir, urlHash(`${origin.url}/data/yes.dat`));
    expect(await readFile(data, "utf8")).toBe("shared input\n");
  }, 90_000);

  it("cache=check: one GET and a revalidation per later job; cache=no: a GET per job", async () => {
    origin.files.set("/data/check.dat", Buffer.from("checked\n"));
    origin.files.set("/data/no.dat", Buffer.from("uncached\n"));
    // Jobs asking while the one download runs take its fresh copy; those after it revalidate.
    const first = await job("/data/check.dat", "check");
    expect((await waitForRest(env, first, ["FINISHED", "FAILED"]))?.failure).toBeUndefined();
    const checks = await Promise.all(Array.from({ length: 19 }, () => job("/data/check.dat", "check")));
    const nos = await Promise.all(Array.from({ length: 20 }, () => job("/data/no.dat", "no")));
    for (const id of [...checks, ...nos]) expect((await waitForRest(env, id, ["FINISHED", "FAILED"], 60_000))?.failure).toBeUndefined();
    expect(origin.count("GET", "/data/check.dat")).toBe(1);
    expect(origin.count("HEAD", "/data/check.dat")).toBe(19);
    expect(origin.count("GET", "/data/no.dat")).toBe(20);
    expect(origin.count("HEAD", "/data/no.dat")).toBe(0);
  }, 90_000);

  it("cache=check downloads again when the origin's file changed", async () => {
    origin.files.set("/data/changes.dat", Buffer.from("version 1\n"));
    const a = await job("/data/changes.dat", "check");
    await waitForRest(env, a, ["FINISHED", "FAILED"]);
    origin.files.set("/data/changes.dat", Buffer.from("version 2\n"));
    const b = await job("/data/changes.dat", "check");
    expect((await waitForRest(env, b, ["FINISHED", "FAILED"]))?.failure).toBeUndefined();
    expect(await readFile(join(env.control.sessionDir(b), "got.txt"), "utf8")).toBe("version 2\n");
    expect(origin.count("GET", "/data/changes.dat")).toBe(2);
  }, 30_000);

  it("a user the origin refuses gets no cached copy, although the file is cached", async () => {
    origin.files.set("/private/p.dat", Buffer.from("only for Test User\n"));
    origin.refuse.add("Other User");
    const first = await job("/private/p.dat", "yes");
    expect((await waitForRest(env, first, ["FINISHED", "FAILED"]))?.failure).toBeUndefined();
    for (const mode of ["yes", "invariant"]) {
      const other = await job("/private/p.dat", mode, OTHER);
      const r = await waitForRest(env, other, ["FINISHED", "FAILED"]);
      expect(r?.rest).toBe("FAILED");
      expect(r?.failure).toMatch(/origin refuses .*p\.dat to this user \(HTTP 403\)/);
    }
    expect(origin.count("GET", "/private/p.dat")).toBe(1); // the refused users got nothing, from anywhere
    // The allowed user again: remembered, no second question to the origin.
    const heads = origin.count("HEAD", "/private/p.dat");
    const again = await job("/private/p.dat", "yes");
    expect((await waitForRest(env, again, ["FINISHED", "FAILED"]))?.failure).toBeUndefined();
    expect(origin.count("HEAD", "/private/p.dat")).toBe(heads);
  }, 30_000);

  it("an unknown cache= value fails the input with a reason", async () => {
    origin.files.set("/data/bad.dat", Buffer.from("x"));
    const r = await waitForRest(env, await job("/data/bad.dat", "sometimes"), ["FINISHED", "FAILED"]);
    expect(r?.failure).toMatch(/cache=sometimes is not one of no, yes, check, invariant, renew, copy/);
  });

  it("a JEM killed during the download is followed by exactly one more download", async () => {
    await jem?.stop();
    jem = undefined;
    origin.files.set("/data/big.dat", Buffer.alloc(64 * 1024, 7));
    origin.slow.slices = 16;
    origin.slow.sliceMs = 150;
    const child = await spawnJem(env.config);
    const ids = await Promise.all(Array.from({ length: 3 }, () => job("/data/big.dat", "yes")));
    await waitFor("the origin serving big.dat", () => origin.count("GET", "/data/big.dat") > 0, 20_000, { everyMs: 50 });
    await quietPeriod(300, "two of the 16 slow slices: the kill lands mid-body");
    await killHard(child);
    origin.slow.slices = 1;
    // Nothing half-written is visible: no data file yet.
    await expect(readFile(dataPath(cacheDir, urlHash(`${origin.url}/data/big.dat`)))).rejects.toThrow();
    jem = await testJem(env);
    for (const id of ids) {
      // The killed JEM's staging run is redone once BullMQ sees it stalled (its staging lock, short in tests).
      const r = await waitForRest(env, id, ["FINISHED", "FAILED"], 150_000);
      expect(r?.failure).toBeUndefined();
      expect((await readFile(join(env.control.sessionDir(id), "got.txt"))).equals(Buffer.alloc(64 * 1024, 7))).toBe(true);
    }
    expect(origin.count("GET", "/data/big.dat")).toBe(2);
  }, 240_000);
});
