import { execFile } from "node:child_process";
import { X509Certificate } from "node:crypto";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { freePort } from "@ce/testing";
import { startTestGateway, type TestGateway } from "./harness.js";

/**
 * Real ARC 6 client path for delegations, from a proxy made by `arcproxy`: `arcsub` (POST ?action=new with no body → sign the CSR
 * → PUT without Content-Type → submit ADL with the DelegationID) and `arcrenew` (POST
 * ?action=renew → sign → PUT). The stored proxy must verify and change on renewal. Skipped without ARC.
 */
const run = promisify(execFile);
const haveArc = ["arcsub", "arcrenew", "arcproxy"].every((c) => existsSync(`/usr/bin/${c}`));

let t: TestGateway;
let env: NodeJS.ProcessEnv;
let home: string;
beforeAll(async () => {
  if (!haveArc) return;
  // arcsub submits to the endpoint URL /info publishes, so it must carry the real port.
  const port = await freePort();
  t = await startTestGateway(inject("redisUrl"), { endpoint: { url: `https://localhost:${port}/arex` }, gateway: { port } });
  home = mkdtempSync(join(tmpdir(), "ce-arc-deleg-"));
  const proxy = join(home, "proxy.pem");
  const caDir = join(home, "ca");
  mkdirSync(caDir);
  for (const f of readdirSync(t.pki.caDir).filter((n) => /\.\d+$/.test(n))) copyFileSync(join(t.pki.caDir, f), join(caDir, f));
  env = { ...process.env, X509_USER_PROXY: proxy, X509_CERT_DIR: caDir, HOME: home };
  // The proxy the client delegates from is made by the real arcproxy from Alice's certificate.
  const user = t.pki.creds.aliceCert!;
  writeFileSync(join(home, "usercert.pem"), user.cert);
  writeFileSync(join(home, "userkey.pem"), user.key, { mode: 0o600 });
  await arc("/usr/bin/arcproxy", [
    "-C",
    join(home, "usercert.pem"),
    "-K",
    join(home, "userkey.pem"),
    "-P",
    proxy,
    "-T",
    caDir,
    "-S",
    "",
    "-c",
    "validityPeriod=2H",
  ]);
}, 60_000);
afterAll(async () => {
  await t?.close();
});

const arc = (cmd: string, args: string[]) => run(cmd, args, { env, timeout: 60_000 });
const leaf = (pem: string) => new X509Certificate(pem.slice(0, pem.indexOf("-----END CERTIFICATE-----") + 25));

describe.skipIf(!haveArc)("ARC 6 client delegation", () => {
  it("arcsub delegates (verified chain stored) and arcrenew replaces the proxy", async () => {
    const desc = join(home, "job.xrsl");
    writeFileSync(
      desc,
      '&(executable="/bin/echo")(arguments="hi")(jobname="deleg")(inputfiles=("remote.dat" "https://example.org/remote.dat"))',
    );
    const joblist = join(home, "jobs.dat");
    const ce = `https://localhost:${t.gw.port}${t.config.mountPath}`;
    const sub = await arc("/usr/bin/arcsub", ["-C", ce, "-T", "arcrest", "-j", joblist, "-d", "WARNING", desc]).catch(
      (e: { stdout: string; stderr: string }) => {
        throw new Error(`arcsub failed:\n${e.stdout}\n${e.stderr}`);
      },
    );
    expect(sub.stdout).toMatch(/Job submitted with jobid/);

    const owner = t.pki.dn.alice;
    const delegs = await t.gw.services.delegations.list(owner, "x509");
    expect(delegs.length).toBe(1);
    const id = delegs[0]!.id;
    const first = await t.gw.services.delegations.credential(owner, id);
    if (first?.type !== "x509") throw new Error("no x509 credential stored");
    // The stored proxy = ARC's new proxy + our key + the arcproxy proxy and Alice's certificate.
    expect(first.proxyPem.match(/BEGIN CERTIFICATE/g)?.length).toBe(3);
    const arcProxy = new X509Certificate(readFileSync(join(home, "proxy.pem"), "utf8"));
    expect(leaf(first.proxyPem).issuer).toBe(arcProxy.subject);

    const renew = await arc("/usr/bin/arcrenew", ["-a", "-j", joblist, "-d", "WARNING"]).catch((e: { stdout: string; stderr: string }) => {
      throw new Error(`arcrenew failed:\n${e.stdout}\n${e.stderr}`);
    });
    expect(renew.stderr).not.toMatch(/ERROR/);
    const second = await t.gw.services.delegations.credential(owner, id);
    if (second?.type !== "x509") throw new Error("no x509 credential after renewal");
    expect(leaf(second.proxyPem).fingerprint256).not.toBe(leaf(first.proxyPem).fingerprint256);
  });
});
