import { execFile } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { startTestGateway, type TestGateway, XRSL } from "./harness.js";

/**
 * Real-client check: `arcls` uses the same HTTP data plugin (PROPFIND Depth 0 then 1) as arcget,
 * and `arccp` the same GET/PUT (If-None-Match: *, Expect: 100-continue). Skipped without ARC.
 */
const run = promisify(execFile);
const ARCLS = "/usr/bin/arcls";
const ARCCP = "/usr/bin/arccp";
const haveArc = existsSync(ARCLS) && existsSync(ARCCP);

let t: TestGateway;
let id: string;
let env: NodeJS.ProcessEnv;
let home: string;
let base: string;
beforeAll(async () => {
  if (!haveArc) return;
  t = await startTestGateway(inject("redisUrl"));
  const sub = await t.request("POST", `${t.rest}/1.0/jobs?action=new`, {
    body: XRSL("arc-client"),
    accept: "application/json",
    headers: { "content-type": "application/rsl" },
  });
  id = sub.json().job[0].id;
  home = mkdtempSync(join(tmpdir(), "ce-arc-"));
  const proxy = join(home, "proxy.pem");
  const alice = t.pki.creds.alice!;
  // ARC proxy file layout: proxy certificate, its key, then the rest of the chain.
  const [first, ...rest] = alice.cert.split(/(?=-----BEGIN CERTIFICATE-----)/);
  writeFileSync(proxy, `${first}${alice.key}${rest.join("")}`, { mode: 0o600 });
  // Only the hashed CA certificates: ARC 6.17 rejects the generated *.signing_policy files.
  const caDir = join(home, "ca");
  mkdirSync(caDir);
  for (const f of readdirSync(t.pki.caDir).filter((n) => /\.\d+$/.test(n))) copyFileSync(join(t.pki.caDir, f), join(caDir, f));
  env = { ...process.env, X509_USER_PROXY: proxy, X509_CERT_DIR: caDir, HOME: home };
  base = `https://localhost:${t.gw.port}${t.rest}/1.0/jobs/${id}/session`;
});
afterAll(async () => {
  await t?.close();
});

const arc = (cmd: string, args: string[]) => run(cmd, args, { env, timeout: 30_000 });

describe.skipIf(!haveArc)("ARC 6 client against the session endpoint", () => {
  it("arccp uploads (PUT with If-None-Match/Expect), also into a new subdirectory and an empty file", async () => {
    const src = join(home, "in.txt");
    writeFileSync(src, "hello\n");
    writeFileSync(join(home, "empty"), "");
    await arc(ARCCP, [src, `${base}/stdout.txt`]);
    await arc(ARCCP, [src, `${base}/sub/res.dat`]);
    await arc(ARCCP, [join(home, "empty"), `${base}/empty.dat`]);
    expect((await t.request("GET", `${t.rest}/1.0/jobs/${id}/session/sub/res.dat`)).text).toBe("hello\n");
    const empty = await t.request("GET", `${t.rest}/1.0/jobs/${id}/session/empty.dat`);
    expect([empty.status, empty.text]).toEqual([200, ""]);
    expect(await t.gw.services.control.read(id, "input_status")).toContain("/empty.dat\n");
  });

  it("arcls -l lists via PROPFIND: files with sizes, directories, names with spaces", async () => {
    expect((await t.request("PUT", `${t.rest}/1.0/jobs/${id}/session/a%20b.txt`, { body: "sp" })).status).toBe(200);
    const { stdout } = await arc(ARCLS, ["-l", base]);
    expect(stdout).toMatch(/^stdout\.txt\s+file\s+6 /m);
    expect(stdout).toMatch(/^a b\.txt\s+file\s+2 /m);
    expect(stdout).toMatch(/^sub\/?\s+dir /m);
    const sub = await arc(ARCLS, ["-l", `${base}/sub/`]);
    expect(sub.stdout).toMatch(/^res\.dat\s+file\s+6 /m);
    const rec = await arc(ARCLS, ["-r", base]);
    expect(rec.stdout).toMatch(/res\.dat/);
  });

  it("arccp downloads a listed name (the client encodes the space itself)", async () => {
    const out = join(home, "spaced.txt");
    await arc(ARCCP, [`${base}/a b.txt`, out]);
    expect(readFileSync(out, "utf8")).toBe("sp");
  });
});
