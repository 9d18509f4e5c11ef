/**
 * rucio:// inputs against the Rucio stand-in (@ce/testing/rucio) whose replicas live on the
 * loopback HTTPS/WebDAV test storage: the aCT URL shape, X.509 authentication, the first working
 * replica, Rucio's checksum, and an unknown DID as a final error.
 */
import { mkdtemp, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Jem } from "../src/daemon.js";
import { checksummer } from "../src/staging/checksum.js";
import { OWNER, output, shellJob, submitTestJob, testEnv, testJem, waitForRest, type TestEnv } from "./helpers.js";
import { startRucioStandIn, type RucioStandIn } from "@ce/testing/rucio";
import { startStorage, testPki, type Storage } from "@ce/testing/storage";

const sum = (alg: "adler32" | "md5", b: Buffer) => {
  const c = checksummer(alg);
  c.update(b);
  return c.digest();
};

let env: TestEnv;
let jem: Jem;
let rucio: RucioStandIn;
let storage: Storage;
let x509: string;

/** The URL as aCT writes it, with the stand-in in place of rucio-lb-prod.cern.ch. */
const rucioUrl = (scope: string, name: string) =>
  `rucio://${rucio.url.slice("https://".length)};rucioaccount=pilot;transferprotocol=https;cache=invariant/replicas/${scope}/${name}`;

describe("rucio:// staging against a Rucio stand-in", () => {
  beforeAll(async () => {
    const pki = testPki();
    storage = await startStorage(pki);
    rucio = await startRucioStandIn(pki);
    const caFile = join(await mkdtemp(join(tmpdir(), "jem-rucio-")), "ca.pem");
    await writeFile(caFile, pki.ca.certPem);
    env = await testEnv({ staging: { caFile, maxRetries: 3, retryBaseMs: 20 } });
    x509 = await env.delegations.create(OWNER, "x509", { privateKeyPem: pki.proxy.keyPem });
    await env.delegations.storeProxy(x509, OWNER, pki.proxy.filePem, Date.now() + 3_600_000, pki.proxy.chainPem);
    jem = await testJem(env);
  }, 60_000);
  afterAll(async () => {
    await jem?.stop();
    await env?.close();
    await rucio?.close();
    await storage?.close();
  });

  it("resolves the DID with the proxy's token and downloads the first replica that works, checking Rucio's adler32", async () => {
    const data = Buffer.from("EVNT payload ".repeat(1000));
    storage.files.set("/x509/atlasdatadisk/rucio/mc23/ab/cd/EVNT.pool.root.1", data);
    const davs = storage.url.replace("https://", "davs://");
    rucio.dids.set("mc23_13p6TeV:EVNT.pool.root.1", {
      bytes: data.length,
      adler32: sum("adler32", data),
      pfns: [
        // Not asked for (transferprotocol=https): never tried.
        { pfn: `root://127.0.0.1:1/atlasdatadisk/rucio/mc23/ab/cd/EVNT.pool.root.1`, rse: "XRD_DATADISK" },
        // Listed but gone from the storage (404): the next replica is tried.
        { pfn: `${davs}/x509/lost/EVNT.pool.root.1`, rse: "LOST_DATADISK" },
        { pfn: `${davs}/x509/atlasdatadisk/rucio/mc23/ab/cd/EVNT.pool.root.1`, rse: "GOOD_DATADISK" },
      ],
    });
    const id = await submitTestJob(
      env,
      shellJob("cp EVNT.pool.root.1 copy.root", {
        inputFiles: [{ name: "EVNT.pool.root.1", source: rucioUrl("mc23_13p6TeV", "EVNT.pool.root.1"), executable: false, options: {} }],
        outputFiles: [output("copy.root")],
      }),
      { mainDelegation: x509, delegations: [x509] },
    );
    const r = await waitForRest(env, id, ["FINISHED", "FAILED"], 30_000);
    expect(r?.failure).toBeUndefined();
    expect(r?.rest).toBe("FINISHED");
    expect((await readFile(join(env.control.sessionDir(id), "copy.root"))).equals(data)).toBe(true);
    const auth = rucio.requests.filter((q) => q.path === "/auth/x509_proxy");
    expect(auth.length).toBeGreaterThan(0);
    expect(auth.every((q) => q.peer !== undefined && q.account === "pilot")).toBe(true);
    const listing = rucio.requests.find((q) => q.path === "/replicas/mc23_13p6TeV/EVNT.pool.root.1");
    expect(listing?.token && rucio.issued.has(listing.token)).toBe(true);
    expect(storage.requests.filter((q) => q.path === "/x509/lost/EVNT.pool.root.1").length).toBeGreaterThan(0);
    expect(await env.control.read(id, "errors")).toContain(
      `resolved by Rucio to ${storage.url}/x509/atlasdatadisk/rucio/mc23/ab/cd/EVNT.pool.root.1`.replace("https://", "davs://"),
    );
  }, 40_000);

  it("a replica that does not match Rucio's checksum fails the job naming both values, without retries", async () => {
    const data = Buffer.from("corrupted on disk\n");
    storage.files.set("/x509/bad/HITS.1", data);
    rucio.dids.set("mc23_13p6TeV:HITS.1", {
      bytes: data.length,
      adler32: "0badc0de",
      pfns: [{ pfn: `${storage.url}/x509/bad/HITS.1`, rse: "BAD_DATADISK" }],
    });
    const id = await submitTestJob(
      env,
      shellJob("true", {
        inputFiles: [{ name: "HITS.1", source: rucioUrl("mc23_13p6TeV", "HITS.1"), executable: false, options: {} }],
      }),
      { mainDelegation: x509, delegations: [x509] },
    );
    const r = await waitForRest(env, id, ["FINISHED", "FAILED"], 30_000);
    expect(r?.rest).toBe("FAILED");
    expect(r?.failure).toMatch(new RegExp(`HITS\\.1: adler32 checksum mismatch .*got ${sum("adler32", data)}, expected 0badc0de`));
    expect(storage.requests.filter((q) => q.path === "/x509/bad/HITS.1").length).toBe(1);
  }, 40_000);

  it("an unknown DID fails the job at once (404, not retried) with Rucio's reason", async () => {
    const id = await submitTestJob(
      env,
      shellJob("true", {
        inputFiles: [{ name: "nope", source: rucioUrl("user.nobody", "nope.root"), executable: false, options: {} }],
      }),
      { mainDelegation: x509, delegations: [x509] },
    );
    const r = await waitForRest(env, id, ["FINISHED", "FAILED"], 30_000);
    expect(r?.rest).toBe("FAILED");
    expect(r?.failure).toMatch(
      /nope: Rucio has no file user\.nobody:nope\.root .*HTTP 404 \(DataIdentifierNotFound: Data identifier 'user\.nobody:nope\.root' not found\)/,
    );
    expect(rucio.requests.filter((q) => q.path === "/replicas/user.nobody/nope.root").length).toBe(1);
  }, 40_000);
});
