/**
 * Exfiltration through the JEM: a job plants symlinks or hard links in its session
 * directory and names them as outputs with a remote destination, hoping the JEM (which may read
 * what the job cannot, e.g. the host key) uploads the target. A real JEM on the fork back end
 * runs the jobs; the destination is an HTTPS storage on loopback. Nothing outside the session may
 * be uploaded, the job fails with a reason naming the refused file, and purge/wipe delete links,
 * never their targets. Also: the proxy file goes once the batch job is over, and a token only
 * travels over https to its audience.
 */
import { createServer, type Server } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import { issueHostCert } from "@ce/x509/testing";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Jem } from "../../apps/jem/src/daemon.js";
import {
  OWNER,
  output,
  sendCommand,
  shellJob,
  submitTestJob,
  testEnv,
  testJem,
  waitFor,
  waitForRest,
  type TestEnv,
} from "../../apps/jem/test/helpers.js";
import { startStorage, testJwt, testPki, type Storage, type TestPki } from "@ce/testing/storage";

const SECRET_TEXT = "-----BEGIN PRIVATE KEY----- host key -----END PRIVATE KEY-----\n";
let env: TestEnv;
let jem: Jem;
let storage: Storage;
let pki: TestPki;
let x509: string;
let outside: string;
let secret: string;

beforeAll(async () => {
  pki = testPki();
  storage = await startStorage(pki);
  const caFile = join(await mkdtemp(join(tmpdir(), "jem-sec-ca-")), "ca.pem");
  await writeFile(caFile, storage.caPem);
  // Same file system as the session dirs (tmpdir), so a hard link to the secret is possible.
  outside = await mkdtemp(join(tmpdir(), "jem-sec-outside-"));
  secret = join(outside, "hostkey.pem");
  await writeFile(secret, SECRET_TEXT, { mode: 0o600 });
  env = await testEnv({ staging: { caFile, maxRetries: 0, retryBaseMs: 20 } });
  x509 = await env.delegations.create(OWNER, "x509", { privateKeyPem: pki.proxy.keyPem });
  await env.delegations.storeProxy(x509, OWNER, pki.proxy.filePem, Date.now() + 3_600_000, pki.proxy.chainPem);
  jem = await testJem(env);
});
afterAll(async () => {
  await jem?.stop();
  await env?.close();
  await storage?.close();
  await rm(outside, { recursive: true, force: true });
});

const uploaded = () => [...storage.files.entries()].filter(([, v]) => v.toString().includes("PRIVATE KEY"));

/** Runs a job uploading `outputs` with the X.509 delegation; returns its final record and errors file. */
async function run(
  script: string,
  outputs: ReturnType<typeof output>[],
  record: Record<string, unknown> = { mainDelegation: x509, delegations: [x509] },
) {
  const id = await submitTestJob(env, shellJob(script, { outputFiles: outputs }), record);
  const r = await waitForRest(env, id, ["FINISHED", "FAILED"]);
  return { id, r, errors: (await env.control.read(id, "errors")) ?? "" };
}

describe("the JEM never uploads what a job links to", () => {
  it("a symlink output: refused, named, nothing sent", async () => {
    const { r, errors } = await run(`ln -s ${secret} out`, [output("out", { target: `${storage.url}/x509/sym/out` })]);
    expect(r?.rest).toBe("FAILED");
    expect(r?.failure).toMatch(/out: refused \/out: it is or passes through a symbolic link/);
    expect(errors).toMatch(/Staging: upload of \/out to \S+ failed: refused \/out: it is or passes through a symbolic link/);
    expect(storage.files.has("/x509/sym/out")).toBe(false);
    expect(uploaded()).toEqual([]);
  });

  it("a hard link to a file outside the session: refused", async () => {
    const { r } = await run(`ln ${secret} out`, [output("out", { target: `${storage.url}/x509/hard/out` })]);
    expect(r?.rest).toBe("FAILED");
    expect(r?.failure).toMatch(/out: refused \/out: it is a hard link/);
    expect(storage.files.has("/x509/hard/out")).toBe(false);
    expect(uploaded()).toEqual([]);
  });

  it("a symlink in the middle of the output path: refused", async () => {
    const { r } = await run(`ln -s ${outside} d`, [output("d/hostkey.pem", { target: `${storage.url}/x509/mid/key` })]);
    expect(r?.rest).toBe("FAILED");
    expect(r?.failure).toMatch(/d\/hostkey.pem: refused \/d: it is or passes through a symbolic link/);
    expect(uploaded()).toEqual([]);
  });

  it("an @list output list that is a symlink is not read", async () => {
    // If the JEM read the list through the link it would upload `data` to /x509/list/leak.
    const list = join(outside, "evil-list");
    await writeFile(list, `data ${storage.url}/x509/list/leak\n`);
    const { r, errors } = await run(`echo payload > data; ln -s ${list} list`, [output("@list")]);
    expect(r?.rest).toBe("FAILED");
    expect(r?.failure).toMatch(/output list refused \/list: it is or passes through a symbolic link/);
    expect(errors).toMatch(/output not uploaded, output list refused \/list/);
    expect(storage.requests.some((q) => q.path.startsWith("/x509/list/"))).toBe(false);
  });

  it("an @list naming a symlink: the list is read, the link refused", async () => {
    const { r } = await run(`ln -s ${secret} k; echo "k ${storage.url}/x509/list2/k" > list`, [output("@list")]);
    expect(r?.rest).toBe("FAILED");
    expect(r?.failure).toMatch(/k: refused \/k: it is or passes through a symbolic link/);
    expect(storage.files.has("/x509/list2/k")).toBe(false);
  });

  it("an output directory with a symlink and a hard link inside: the rest is uploaded, those are refused", async () => {
    const { r } = await run(
      `mkdir -p res/sub; echo ok > res/a; ln -s ${secret} res/leak; ln -s ${outside} res/sub/dir; ln ${secret} res/hard`,
      [output("res/", { target: `${storage.url}/x509/dir/` })],
    );
    expect(r?.rest).toBe("FAILED");
    expect(r?.failure).toMatch(/refused \/res\/leak: it is or passes through a symbolic link/);
    expect(r?.failure).toMatch(/refused \/res\/sub\/dir: it is or passes through a symbolic link/);
    expect(r?.failure).toMatch(/refused \/res\/hard: it is a hard link/);
    expect(storage.files.get("/x509/dir/a")?.toString()).toBe("ok\n");
    expect(uploaded()).toEqual([]);
  });

  it("an output directory that is itself a symlink: refused", async () => {
    const { r } = await run(`ln -s ${outside} res`, [output("res/", { target: `${storage.url}/x509/dirlink/` })]);
    expect(r?.rest).toBe("FAILED");
    expect(r?.failure).toMatch(/refused \/res: it is or passes through a symbolic link/);
    expect(storage.requests.some((q) => q.path.startsWith("/x509/dirlink/"))).toBe(false);
  });

  it("a directory swapped for a link during the stage-out never leaks", { timeout: 60_000 }, async () => {
    // A process the job leaves behind swaps res/sub with a link to a decoy directory whose files
    // have the same names but secret content: a check-then-open-by-path would read the decoy.
    // The window is small, so a few rounds (a check-then-open race shows in about one round of three).
    const decoy = join(outside, "decoy");
    await mkdir(decoy, { recursive: true });
    for (let i = 1; i <= 100; i++) await writeFile(join(decoy, `f${i}`), SECRET_TEXT);
    const script = [
      "mkdir -p res/sub; i=1; while [ $i -le 100 ]; do echo $i > res/sub/f$i; i=$((i+1)); done",
      `(i=0; while [ $i -lt 1500 ]; do mv res/sub parked; ln -s ${decoy} res/sub; sleep 0.01; rm -f res/sub; mv parked res/sub; sleep 0.002; i=$((i+1)); done) >/dev/null 2>&1 &`,
      "echo $! > swapper.pid",
    ].join("\n");
    for (let round = 0; round < 6; round++) {
      const { id, r } = await run(script, [output("res/", { target: `${storage.url}/x509/race/` }), output("swapper.pid")]);
      const pid = Number((await readFile(join(env.control.sessionDir(id), "swapper.pid"), "utf8").catch(() => "0")).trim());
      if (pid > 0) {
        try {
          process.kill(pid); // the test started it (through the job): end it by its id
        } catch {
          // already ended
        }
      }
      expect(["FINISHED", "FAILED"]).toContain(r?.rest);
    }
    expect(uploaded()).toEqual([]);
    const race = [...storage.files.entries()].filter(([k]) => k.startsWith("/x509/race/"));
    expect(race.every(([k, v]) => /\/race\/sub\/f\d+$/.test(k) && /^\d+\n$/.test(v.toString()))).toBe(true);
    expect(await readFile(secret, "utf8")).toBe(SECRET_TEXT);
  });
});

describe("purge and wipe delete links, never their targets", () => {
  it("purge at FINISHING and clean", async () => {
    const target = join(outside, "purge-target");
    await mkdir(join(target, "inner"), { recursive: true });
    await writeFile(join(target, "inner/precious"), "keep me");
    const { id, r } = await run(
      `ln -s ${target} junk; mkdir -p a/b; ln -s ${target} a/b/link; ln ${secret} hard; ln -s ${target} kept`,
      [output("kept")],
      {},
    );
    expect(r?.rest).toBe("FINISHED");
    const session = env.control.sessionDir(id);
    expect(existsSync(join(session, "junk"))).toBe(false); // purged: the link itself
    expect(existsSync(join(session, "a"))).toBe(false);
    expect(await readFile(join(target, "inner/precious"), "utf8")).toBe("keep me");
    expect(await readFile(secret, "utf8")).toBe(SECRET_TEXT);
    await sendCommand(env, "clean", id);
    await waitForRest(env, id, "GONE");
    expect(existsSync(session)).toBe(false);
    expect(await readFile(join(target, "inner/precious"), "utf8")).toBe("keep me");
  });

  it("wipe at expiry removes a kept link, not the directory it names", async () => {
    const target = join(outside, "wipe-target");
    await mkdir(target, { recursive: true });
    await writeFile(join(target, "precious"), "keep me");
    const id = await submitTestJob(
      env,
      shellJob(`ln -s ${target} kept; mkdir -p d/e; ln -s ${target} d/e/l`, { outputFiles: [output("kept"), output("d/")] }),
      { lifetime: 1 },
    );
    await waitForRest(env, id, "WIPED", 30_000);
    expect(existsSync(env.control.sessionDir(id))).toBe(false);
    expect(await readFile(join(target, "precious"), "utf8")).toBe("keep me");
  });
});

describe("secrets", () => {
  it("the proxy file exists while the batch job runs and is gone once the job is FINISHED, before any wipe", async () => {
    const { id, r } = await run('if test -s "$X509_USER_PROXY"; then echo present > saw; else echo absent > saw; fi', [output("saw")]);
    expect(r?.rest).toBe("FINISHED");
    expect(await readFile(join(env.control.sessionDir(id), "saw"), "utf8")).toBe("present\n");
    expect(existsSync(env.control.file(id, "proxy"))).toBe(false);
    expect(existsSync(env.control.sessionDir(id))).toBe(true); // not wiped: the proxy went first
  });

  it("a token is not sent to an endpoint outside its audience (upload and download)", async () => {
    const tok = await env.delegations.create(OWNER, "jwt", {
      token: testJwt("https://storage.elsewhere.example"),
      expires: Date.now() + 3_600_000,
    });
    const before = storage.requests.length;
    const { r, errors } = await run("echo x > out", [output("out", { target: `${storage.url}/token/aud/out` })], {
      mainDelegation: tok,
      delegations: [tok],
    });
    expect(r?.rest).toBe("FAILED");
    expect(r?.failure).toMatch(
      /out: token not sent to https:\/\/127\.0\.0\.1:\d+\/token\/aud\/out: the endpoint https:\/\/127\.0\.0\.1:\d+ is not the token's audience \(https:\/\/storage\.elsewhere\.example\)/,
    );
    expect(errors).toMatch(/token not sent to/);
    expect(storage.requests.length).toBe(before); // not even a connection with the token
    storage.files.set("/token/in.bin", Buffer.from("in"));
    const id = await submitTestJob(
      env,
      shellJob("true", { inputFiles: [{ name: "in.bin", source: `${storage.url}/token/in.bin`, executable: false, options: {} }] }),
      { mainDelegation: tok, delegations: [tok] },
    );
    const r2 = await waitForRest(env, id, ["FINISHED", "FAILED"]);
    expect(r2?.failure).toMatch(/in\.bin: token not sent to .* is not the token's audience/);
    expect(storage.requests.length).toBe(before);
  });

  it("a token whose audience is the endpoint goes only over https", async () => {
    const seen: string[] = [];
    const http: Server = createServer((req, res) => {
      seen.push(`${req.method} ${req.url} ${req.headers.authorization ?? ""}`);
      res.writeHead(201).end();
    });
    await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
    try {
      const origin = `http://127.0.0.1:${(http.address() as { port: number }).port}`;
      const tok = await env.delegations.create(OWNER, "jwt", { token: testJwt(origin), expires: Date.now() + 3_600_000 });
      const { r } = await run("echo x > out", [output("out", { target: `${origin}/out` })], { mainDelegation: tok, delegations: [tok] });
      expect(r?.rest).toBe("FAILED");
      expect(r?.failure).toMatch(/token not sent to http:\/\/127\.0\.0\.1:\d+\/out: a token is sent over https only/);
      expect(seen).toEqual([]);
    } finally {
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    }
  });

  it("a redirect to another origin does not carry the token", async () => {
    const seen: string[] = [];
    const other: Server = createServer((req, res) => {
      seen.push(req.headers.authorization ?? "(none)");
      res.writeHead(200, { "content-length": 4 }).end("data");
    });
    await new Promise<void>((resolve) => other.listen(0, "127.0.0.1", resolve));
    const otherUrl = `http://127.0.0.1:${(other.address() as { port: number }).port}`;
    const host = issueHostCert(pki.ca, { hostnames: ["127.0.0.1"] });
    const aud = createHttpsServer({ key: host.keyPem, cert: host.certPem }, (req, res) => {
      seen.push(`aud:${req.headers.authorization ? "token" : "(none)"}`);
      res.writeHead(302, { location: `${otherUrl}/in.bin` }).end();
    });
    await new Promise<void>((resolve) => aud.listen(0, "127.0.0.1", resolve));
    try {
      const origin = `https://127.0.0.1:${(aud.address() as { port: number }).port}`;
      const tok = await env.delegations.create(OWNER, "jwt", { token: testJwt(origin), expires: Date.now() + 3_600_000 });
      const id = await submitTestJob(
        env,
        shellJob("true", { inputFiles: [{ name: "in.bin", source: `${origin}/in.bin`, executable: false, options: {} }] }),
        { mainDelegation: tok, delegations: [tok] },
      );
      await waitForRest(env, id, ["FINISHED", "FAILED"]);
      expect(seen).toEqual(["aud:token", "(none)"]); // the audience got it, the redirect target did not
    } finally {
      for (const srv of [other, aud]) {
        srv.closeAllConnections();
        await new Promise<void>((resolve) => srv.close(() => resolve()));
      }
    }
  });

  it("the WLCG any-audience is refused unless the operator allows it", async () => {
    const any = testJwt("https://wlcg.cern.ch/jwt/v1/any");
    const tok = await env.delegations.create(OWNER, "jwt", { token: any, expires: Date.now() + 3_600_000 });
    const { r } = await run("echo x > out", [output("out", { target: `${storage.url}/token/any/out` })], {
      mainDelegation: tok,
      delegations: [tok],
    });
    expect(r?.rest).toBe("FAILED");
    expect(r?.failure).toMatch(/WLCG any-audience, which this CE does not accept \(staging\.allowAnyAudienceTokens\)/);
    expect(storage.files.has("/token/any/out")).toBe(false);

    // Same job on a CE that allows it: the token reaches the storage (which accepts only its own token).
    const caFile = join(await mkdtemp(join(tmpdir(), "jem-sec-ca2-")), "ca.pem");
    await writeFile(caFile, storage.caPem);
    const env2 = await testEnv({ staging: { caFile, maxRetries: 0, allowAnyAudienceTokens: true } });
    const jem2 = await testJem(env2);
    try {
      const tok2 = await env2.delegations.create(OWNER, "jwt", { token: any, expires: Date.now() + 3_600_000 });
      const id = await submitTestJob(
        env2,
        shellJob("echo x > out", { outputFiles: [output("out", { target: `${storage.url}/token/any2/out` })] }),
        { mainDelegation: tok2, delegations: [tok2] },
      );
      await waitForRest(env2, id, ["FINISHED", "FAILED"]);
      await waitFor("the PUT with the any-audience token", async () =>
        storage.requests.find((q) => q.path === "/token/any2/out" && q.authorization === `Bearer ${any}`),
      );
    } finally {
      await jem2.stop();
      await env2.close();
    }
  });
});
