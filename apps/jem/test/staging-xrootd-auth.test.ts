/**
 * root:// staging against a real xrootd on loopback that requires GSI (`sec.protbind * only gsi`)
 * and trusts a throw-away test CA: transfers in and out with the job's delegated proxy, a proxy the
 * server refuses, a job without a credential while the JEM's own environment holds a valid proxy,
 * tokens (client side: ztn, audience), per-file facts and per-protocol metrics. Jobs are mapped to
 * a real account: xrdcp runs as it, with the job's credential in that account's private directory.
 */
import { mkdtemp, readFile, mkdir, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createMetrics, type CeMetrics } from "@ce/ops";
import { createCA, createProxy, issueUserCert } from "@ce/x509/testing";
import type { Jem } from "../src/daemon.js";
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
import { testJwt, testPki } from "@ce/testing/storage";
import { haveXrootd, startXrootd, type Xrootd } from "@ce/testing/xrootd";

const adler = (s: string) => {
  const c = checksummer("adler32");
  c.update(Buffer.from(s));
  return c.digest();
};

let env: TestEnv;
let jem: Jem;
let xrd: Xrootd;
let metrics: CeMetrics;
let x509: string;
let foreign: string;
let localUser: LocalUser;
const accounts = new TestAccounts();
const saved = { proxy: process.env.X509_USER_PROXY, certDir: process.env.X509_CERT_DIR };

const metric = async (name: string, labels: string) => {
  const line = (await metrics.registry.metrics()).split("\n").find((l) => l.startsWith(`${name}{${labels}}`));
  return line === undefined ? 0 : Number(line.split(" ").pop());
};

describe.skipIf(!haveXrootd())("xrootd staging with GSI", () => {
  beforeAll(async () => {
    const pki = testPki();
    xrd = await startXrootd({ gsi: { ca: pki.ca } });
    const dir = await mkdtemp(join(tmpdir(), "jem-xrd-gsi-"));
    await writeFile(join(dir, "ca.pem"), pki.ca.certPem);
    // The JEM's own environment holds a valid proxy: no job may be authenticated with it.
    const site = createProxy(pki.user, pki.user.key, { lifetimeSeconds: 3600 });
    await writeFile(join(dir, "site-proxy.pem"), site.filePem, { mode: 0o600 });
    process.env.X509_USER_PROXY = join(dir, "site-proxy.pem");
    process.env.X509_CERT_DIR = xrd.certDir;
    const m = await mappedAccount(accounts, "xg");
    localUser = m.localUser;
    env = await testEnv({ mapping: m.mapping, staging: { caFile: join(dir, "ca.pem"), maxRetries: 2, retryBaseMs: 20 } });
    await mappedStateDir(env);
    x509 = await env.delegations.create(OWNER, "x509", { privateKeyPem: pki.proxy.keyPem });
    await env.delegations.storeProxy(x509, OWNER, pki.proxy.filePem, Date.now() + 3_600_000, pki.proxy.chainPem);
    // A proxy of a CA the server does not trust.
    const other = createCA({ dn: "/DC=org/DC=elsewhere/CN=Other CA" });
    const stranger = issueUserCert(other, { dn: "/DC=org/DC=elsewhere/CN=Stranger" });
    const proxy = createProxy(stranger, stranger.key, { lifetimeSeconds: 3600 });
    foreign = await env.delegations.create(OWNER, "x509", { privateKeyPem: proxy.keyPem });
    await env.delegations.storeProxy(foreign, OWNER, proxy.filePem, Date.now() + 3_600_000, proxy.chainPem);
    metrics = createMetrics({ defaultMetrics: false });
    jem = await testJem(env, { metrics });
    await mkdir(join(xrd.dataDir, "in"), { recursive: true });
    await writeFile(join(xrd.dataDir, "in", "evnt.root"), "gsi input\n");
  }, 60_000);
  afterAll(async () => {
    for (const [k, v] of [
      ["X509_USER_PROXY", saved.proxy],
      ["X509_CERT_DIR", saved.certDir],
    ] as const) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
    await jem?.stop();
    await env?.close();
    await xrd?.close();
    await accounts.remove();
  });

  it("downloads and uploads with the job's proxy; per-file facts in errors and output_status; metrics by protocol", async () => {
    const out = "gsi hits\n";
    const id = await submitTestJob(
      env,
      shellJob(
        `cp evnt.root copy.txt; printf '${out}' > HITS.1; echo 'HITS.1 ${xrd.url}//atlas/g/HITS.1:checksumtype=adler32:checksumvalue=${adler(out)}' > output.list`,
        {
          inputFiles: [{ name: "evnt.root", source: `${xrd.url}//in/evnt.root`, executable: false, options: { checksum: "adler32" } }],
          outputFiles: [output("@output.list"), output("copy.txt")],
        },
      ),
      { mainDelegation: x509, delegations: [x509], localUser },
    );
    const r = await waitForRest(env, id, ["FINISHED", "FAILED"], 40_000);
    expect(r?.failure).toBeUndefined();
    expect(await readFile(join(env.control.sessionDir(id), "copy.txt"), "utf8")).toBe("gsi input\n");
    expect(await readFile(join(xrd.dataDir, "atlas/g/HITS.1"), "utf8")).toBe(out);
    const errors = (await env.control.read(id, "errors")) ?? "";
    // Source, bytes, checksum and duration of each file.
    expect(errors).toMatch(
      new RegExp(
        `downloaded root://localhost:\\d+//in/evnt\\.root -> /evnt\\.root \\(10 bytes, adler32:${adler("gsi input\n")}, \\d+\\.\\d\\d s\\)`,
      ),
    );
    expect(errors).toMatch(
      new RegExp(
        `uploaded /HITS\\.1 -> root://localhost:\\d+//atlas/g/HITS\\.1:checksumtype=adler32:checksumvalue=${adler(out)} \\(9 bytes, adler32:${adler(out)}, \\d+\\.\\d\\d s\\)`,
      ),
    );
    // output_status stays `<pfn> <URL>` (ARC's FileData); the checksum is the URL's metadata.
    expect(await env.control.read(id, "output_status")).toMatch(
      new RegExp(`^/HITS\\.1 root://localhost:\\d+//atlas/g/HITS\\.1:checksumtype=adler32:checksumvalue=${adler(out)}$`, "m"),
    );
    expect(await metric("ce_staging_files_total", 'direction="in",protocol="root"')).toBe(1);
    expect(await metric("ce_staging_files_total", 'direction="out",protocol="root"')).toBe(1);
    expect(await metric("ce_staging_bytes_total", 'direction="in",protocol="root"')).toBe(10);
    expect(await metric("ce_staging_bytes_total", 'direction="out",protocol="root"')).toBe(9);
  }, 60_000);

  it("a proxy the server refuses fails the job at once with a reason naming the authentication failure", async () => {
    const before = await metric("ce_staging_failures_total", 'direction="in",protocol="root"');
    const id = await submitTestJob(
      env,
      shellJob("true", {
        inputFiles: [{ name: "evnt.root", source: `${xrd.url}//in/evnt.root`, executable: false, options: {} }],
      }),
      { mainDelegation: foreign, delegations: [foreign], localUser },
    );
    const r = await waitForRest(env, id, ["FINISHED", "FAILED"], 40_000);
    expect(r?.rest).toBe("FAILED");
    expect(r?.failure).toMatch(
      /evnt\.root: xrdcp root:\/\/localhost:\d+\/\/in\/evnt\.root: authentication failed, the server refused the job's X\.509 proxy \(GSI\): .*Auth failed/,
    );
    // Final: one attempt, no retry.
    expect(await env.control.read(id, "errors")).not.toMatch(/retry 1/);
    expect(await metric("ce_staging_failures_total", 'direction="in",protocol="root"')).toBe(before + 1);
  }, 60_000);

  it("a job without a credential is not authenticated with the JEM's own proxy", async () => {
    const id = await submitTestJob(
      env,
      shellJob("true", {
        inputFiles: [{ name: "evnt.root", source: `${xrd.url}//in/evnt.root`, executable: false, options: {} }],
      }),
      { localUser },
    );
    const r = await waitForRest(env, id, ["FINISHED", "FAILED"], 40_000);
    expect(r?.rest).toBe("FAILED");
    expect(r?.failure).toMatch(/authentication failed, the server refused no credential \(the job delegated none\)/);
  }, 60_000);

  it("tokens: sent by ztn only to their audience; a GSI-only server refuses them without falling back to a proxy", async () => {
    const port = new URL(xrd.url.replace("root:", "http:")).port;
    const mine = await env.delegations.create(OWNER, "jwt", {
      token: testJwt(`roots://localhost:${port}`),
      expires: Date.now() + 3_600_000,
    });
    const elsewhere = await env.delegations.create(OWNER, "jwt", {
      token: testJwt("roots://storage.example.org:1094"),
      expires: Date.now() + 3_600_000,
    });
    const job = (d: string) =>
      submitTestJob(
        env,
        shellJob("true", {
          inputFiles: [{ name: "evnt.root", source: `${xrd.url}//in/evnt.root`, executable: false, options: {} }],
        }),
        { mainDelegation: d, delegations: [d], localUser },
      );
    const [a, b] = await Promise.all([job(mine), job(elsewhere)]);
    const [ra, rb] = await Promise.all([
      waitForRest(env, a, ["FINISHED", "FAILED"], 40_000),
      waitForRest(env, b, ["FINISHED", "FAILED"], 40_000),
    ]);
    expect(ra?.failure).toMatch(/authentication failed, the server refused the job's token \(ztn\)/);
    expect(rb?.failure).toMatch(
      /token not sent to root:\/\/localhost:\d+\/\/in\/evnt\.root: the endpoint localhost:\d+ is not the token's audience \(roots:\/\/storage\.example\.org:1094\)/,
    );
  }, 60_000);
});
