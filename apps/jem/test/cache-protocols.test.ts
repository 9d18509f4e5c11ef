/**
 * The input cache for rucio://, dav(s):// and root:// inputs: one download per site, and the
 * access check with each user's own credential (Rucio stand-in @ce/testing/rucio over the
 * loopback HTTPS test storage; Apache mod_dav, and xrootd with GSI trusting the test CA, where
 * installed). Run as root (CI), jobs are mapped to a real account: xrdcp/xrdfs run as it.
 */
import { chmod, mkdir, mkdtemp, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCA, createProxy, issueHostCert, issueUserCert } from "@ce/x509/testing";
import type { Jem } from "../src/daemon.js";
import { findEntry } from "../src/priv/rootfs-cache.js";
import { cacheTarget } from "../src/staging/cache/policy.js";
import { checksummer } from "../src/staging/checksum.js";
import { TestAccounts } from "@ce/mapping/testing";
import type { LocalUser } from "@ce/model";
import {
  mappedAccount,
  mappedStateDir,
  OWNER,
  output,
  shellJob,
  submitTestJob,
  testEnv,
  testJem,
  waitForRest,
  type TestEnv,
} from "./helpers.js";
import { haveApache, startApache, type Apache } from "@ce/testing/apache";
import { startRucioStandIn, type RucioStandIn } from "@ce/testing/rucio";
import { startStorage, testPki, type Storage, type TestPki } from "@ce/testing/storage";
import { haveXrootd, startXrootd, type Xrootd } from "@ce/testing/xrootd";

let env: TestEnv;
let jem: Jem;
let pki: TestPki;
let storage: Storage;
let rucio: RucioStandIn;
let cacheDir: string;
const accounts = new TestAccounts();
let localUser: LocalUser | undefined;
const deleg = new Map<string, string>();
const SECOND = "/DC=org/DC=test/CN=Second User";
const REFUSED = "/DC=org/DC=test/CN=Refused User";
const STRANGER = "/DC=org/DC=elsewhere/CN=Stranger";

const adler = (b: Buffer) => {
  const c = checksummer("adler32");
  c.update(b);
  return c.digest();
};

async function delegationOf(owner: string): Promise<string> {
  let id = deleg.get(owner);
  if (!id) {
    const user = owner === OWNER ? pki.user : issueUserCert(pki.ca, { dn: owner });
    const proxy = owner === OWNER ? pki.proxy : createProxy(user, user.key, { lifetimeSeconds: 3600 });
    id = await env.delegations.create(owner, "x509", { privateKeyPem: proxy.keyPem });
    await env.delegations.storeProxy(id, owner, proxy.filePem, Date.now() + 3_600_000, proxy.chainPem);
    deleg.set(owner, id);
  }
  return id;
}

async function job(source: string, options: Record<string, string>, owner = OWNER): Promise<string> {
  const d = await delegationOf(owner);
  return submitTestJob(
    env,
    shellJob("cat in.dat > got.txt", {
      inputFiles: [{ name: "in.dat", source, executable: false, options }],
      outputFiles: [output("got.txt")],
    }),
    { owner, mainDelegation: d, delegations: [d], ...(localUser ? { localUser } : {}) },
  );
}

const finished = async (id: string, content: Buffer) => {
  const r = await waitForRest(env, id, ["FINISHED", "FAILED"], 60_000);
  expect(r?.failure).toBeUndefined();
  expect((await readFile(join(env.control.sessionDir(id), "got.txt"))).equals(content)).toBe(true);
};

beforeAll(async () => {
  pki = testPki();
  storage = await startStorage(pki);
  rucio = await startRucioStandIn(pki);
  const dir = await mkdtemp(join(tmpdir(), "jem-cachep-"));
  await writeFile(join(dir, "ca.pem"), pki.ca.certPem);
  cacheDir = join(dir, "c");
  await chmod(dir, 0o711); // a mapped job reads its cached input through the link
  const m = TestAccounts.available() ? await mappedAccount(accounts, "cp") : undefined;
  localUser = m?.localUser;
  env = await testEnv({
    ...(m ? { mapping: m.mapping } : {}),
    staging: {
      caFile: join(dir, "ca.pem"),
      maxRetries: 2,
      retryBaseMs: 20,
      cache: { dirs: [{ path: cacheDir }], cleanIntervalSeconds: 3600 },
    },
  });
  if (m) await mappedStateDir(env);
  jem = await testJem(env);
}, 60_000);
afterAll(async () => {
  await jem?.stop();
  await env?.close();
  await rucio?.close();
  await storage?.close();
  await accounts.remove();
});

describe("rucio:// inputs in the cache", () => {
  /** As aCT writes it, with the stand-in in place of rucio-lb-prod.cern.ch. */
  const act = (name: string) =>
    `rucio://${rucio.url.slice("https://".length)};rucioaccount=pilot;transferprotocol=https;cache=invariant/replicas/mc23_13p6TeV/${name}`;
  const listingsBy = (name: string) =>
    new Set(
      rucio.requests.filter((q) => q.path === `/replicas/mc23_13p6TeV/${name}`).map((q) => rucio.issued.get(q.token ?? "")?.split("/")[0]),
    );

  it("cache=invariant: one download at the storage for all jobs; Rucio asked with each user's proxy, a user it refuses gets nothing", async () => {
    const data = Buffer.from("AOD payload ".repeat(500));
    storage.files.set("/x509/disk/AOD.1", data);
    rucio.dids.set("mc23_13p6TeV:AOD.1", {
      bytes: data.length,
      adler32: adler(data),
      pfns: [{ pfn: `${storage.url}/x509/disk/AOD.1`, rse: "DISK" }],
    });
    rucio.refuse.add("Refused User");
    const mine = await Promise.all(Array.from({ length: 4 }, () => job(act("AOD.1"), {})));
    // The same DID without the URL's account and protocol options: the same cached file.
    mine.push(await job(`rucio://${rucio.url.slice("https://".length)}/replicas/mc23_13p6TeV/AOD.1`, { cache: "invariant" }));
    const second = await Promise.all([job(act("AOD.1"), {}, SECOND), job(act("AOD.1"), {}, SECOND)]);
    const refused = await job(act("AOD.1"), {}, REFUSED);
    for (const id of [...mine, ...second]) await finished(id, data);
    const r = await waitForRest(env, refused, ["FINISHED", "FAILED"], 60_000);
    expect(storage.requests.filter((q) => q.method === "GET" && q.path === "/x509/disk/AOD.1").length).toBe(1);
    expect(r?.rest).toBe("FAILED");
    expect(r?.failure).toMatch(
      /in\.dat: the origin refuses rucio:.*AOD\.1 to this user \(HTTP 401: .*CannotAuthenticate.*\); the cached copy is not given out/,
    );
    expect(listingsBy("AOD.1")).toEqual(new Set(["Test User", "Second User"]));
    const stats = await Promise.all([...mine, ...second].map(async (id) => (await env.control.read(id, "statistics")) ?? ""));
    expect(stats.filter((l) => l.includes("fromcache=yes")).length).toBe(6);
    // One entry, named by the DID at this Rucio.
    expect((await findEntry(cacheDir, cacheTarget(act("AOD.1"), {}).hash))?.meta?.url).toBe(
      `rucio://${rucio.url.slice("https://".length)}/mc23_13p6TeV:AOD.1`,
    );
  }, 90_000);

  it("cache=check: Rucio's adler32 is the validator; a changed file is downloaded again", async () => {
    const v1 = Buffer.from("version one\n");
    const v2 = Buffer.from("version two!\n");
    storage.files.set("/x509/disk/EVNT.2", v1);
    rucio.dids.set("mc23_13p6TeV:EVNT.2", {
      bytes: v1.length,
      adler32: adler(v1),
      pfns: [{ pfn: `${storage.url}/x509/disk/EVNT.2`, rse: "DISK" }],
    });
    await finished(await job(act("EVNT.2"), { cache: "check" }), v1);
    await finished(await job(act("EVNT.2"), { cache: "check" }), v1);
    const gets = () => storage.requests.filter((q) => q.method === "GET" && q.path === "/x509/disk/EVNT.2").length;
    expect(gets()).toBe(1);
    storage.files.set("/x509/disk/EVNT.2", v2);
    rucio.dids.set("mc23_13p6TeV:EVNT.2", {
      bytes: v2.length,
      adler32: adler(v2),
      pfns: [{ pfn: `${storage.url}/x509/disk/EVNT.2`, rse: "DISK" }],
    });
    await finished(await job(act("EVNT.2"), { cache: "check" }), v2);
    expect(gets()).toBe(2);
  }, 60_000);
});

let apache: Apache;
describe.skipIf(!haveApache())("davs:// inputs in the cache", () => {
  beforeAll(async () => {
    apache = await startApache(issueHostCert(pki.ca, { hostnames: ["localhost", "127.0.0.1"] }));
  }, 30_000);
  afterAll(async () => apache?.close());

  it("cache=yes: one GET at the WebDAV server; the https:// form of the URL is the same entry", async () => {
    await mkdir(join(apache.docRoot, "in"), { recursive: true });
    const data = Buffer.from("pilot tarball\n");
    await writeFile(join(apache.docRoot, "in", "pilot.tgz"), data);
    const davs = `${apache.httpsUrl.replace("https://", "davs://")}/in/pilot.tgz`;
    const ids = await Promise.all(Array.from({ length: 3 }, () => job(davs, { cache: "yes" })));
    for (const id of ids) await finished(id, data);
    await finished(await job(`${apache.httpsUrl}/in/pilot.tgz`, { cache: "yes" }), data);
    const reqs = (await apache.requests()).filter((q) => q.path === "/in/pilot.tgz");
    expect(reqs.filter((q) => q.method === "GET").length).toBe(1);
    // A second user: asked for with a HEAD (their own access), served from the cache.
    await finished(await job(davs, { cache: "yes" }, SECOND), data);
    const after = (await apache.requests()).filter((q) => q.path === "/in/pilot.tgz");
    expect(after.filter((q) => q.method === "GET").length).toBe(1);
    expect(after.filter((q) => q.method === "HEAD").length).toBeGreaterThan(0);
  }, 60_000);
});

let xrd: Xrootd;
let counted: string;
describe.skipIf(!haveXrootd())("root:// inputs in the cache", () => {
  beforeAll(async () => {
    xrd = await startXrootd({ gsi: { ca: pki.ca } });
    // xrdcp is found through PATH (the credential environment keeps the JEM's): a wrapper counts runs.
    // It runs as the job's account: the directory is traversable and the count file writable by it.
    const bin = await mkdtemp(join(tmpdir(), "jem-xrdcp-"));
    await chmod(bin, 0o755);
    counted = join(bin, "runs");
    await writeFile(counted, "", { mode: 0o666 });
    await chmod(counted, 0o666);
    await writeFile(join(bin, "xrdcp"), `#!/bin/sh\necho run >> ${counted}\nexec /usr/bin/xrdcp "$@"\n`);
    await chmod(join(bin, "xrdcp"), 0o755);
    process.env.PATH = `${bin}:${process.env.PATH ?? "/usr/bin:/bin"}`;
  }, 30_000);
  afterAll(async () => xrd?.close());

  it("cache=yes: one xrdcp for all jobs; a proxy the server refuses (GSI) gets no cached copy", async () => {
    await mkdir(join(xrd.dataDir, "in"), { recursive: true });
    const data = Buffer.from("conditions data\n");
    await writeFile(join(xrd.dataDir, "in", "cond.root"), data);
    const ids = await Promise.all(Array.from({ length: 3 }, () => job(`${xrd.url}//in/cond.root`, { cache: "yes" })));
    for (const id of ids) await finished(id, data);
    expect((await readFile(counted, "utf8")).trim().split("\n").length).toBe(1);
    // Another user of the trusted CA: asked by xrdfs stat with their proxy, served from the cache.
    await finished(await job(`${xrd.url}//in/cond.root`, { cache: "yes" }, SECOND), data);
    // A proxy of a CA the server does not trust.
    const other = createCA({ dn: "/DC=org/DC=elsewhere/CN=Other CA" });
    const stranger = issueUserCert(other, { dn: STRANGER });
    const proxy = createProxy(stranger, stranger.key, { lifetimeSeconds: 3600 });
    const d = await env.delegations.create(STRANGER, "x509", { privateKeyPem: proxy.keyPem });
    await env.delegations.storeProxy(d, STRANGER, proxy.filePem, Date.now() + 3_600_000, proxy.chainPem);
    deleg.set(STRANGER, d);
    const r = await waitForRest(env, await job(`${xrd.url}//in/cond.root`, { cache: "yes" }, STRANGER), ["FINISHED", "FAILED"], 60_000);
    expect(r?.rest).toBe("FAILED");
    expect(r?.failure).toMatch(
      /in\.dat: the origin refuses root:.*cond\.root to this user \(HTTP 401: authentication refused \(the job's X\.509 proxy \(GSI\)\).*\); the cached copy is not given out/,
    );
    expect((await readFile(counted, "utf8")).trim().split("\n").length).toBe(1);
  }, 60_000);
});
