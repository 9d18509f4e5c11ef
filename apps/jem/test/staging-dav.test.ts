/**
 * dav:/davs: staging against a real Apache httpd with mod_dav on loopback, ATLAS-shaped: inputs
 * by dav:// and davs://, outputs through an `@output.list` whose lines carry the pilot's
 * `:checksumtype=adler32:checksumvalue=…` metadata; inputs from a listed software area.
 */
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, open, readFile, readlink, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { issueHostCert } from "@ce/x509/testing";
import type { Jem } from "../src/daemon.js";
import { checksummer } from "../src/staging/checksum.js";
import { transferClient, upload } from "../src/staging/http.js";
import { OWNER, output, shellJob, submitTestJob, testEnv, testJem, waitForRest, type TestEnv } from "./helpers.js";
import { haveApache, startApache, type Apache } from "@ce/testing/apache";
import { testJwt, testPki } from "@ce/testing/storage";

const adler = (s: string) => {
  const c = checksummer("adler32");
  c.update(Buffer.from(s));
  return c.digest();
};

let env: TestEnv;
let jem: Jem;
let apache: Apache;
let x509: string;
let software: string;

describe.skipIf(!haveApache())("WebDAV staging against Apache mod_dav", () => {
  beforeAll(async () => {
    const pki = testPki();
    const host = issueHostCert(pki.ca, { hostnames: ["localhost", "127.0.0.1"] });
    apache = await startApache(host);
    const dir = await mkdtemp(join(tmpdir(), "jem-dav-"));
    await writeFile(join(dir, "ca.pem"), pki.ca.certPem);
    software = join(dir, "cvmfs", "atlas.example.org");
    await mkdir(join(software, "repo"), { recursive: true });
    await writeFile(join(software, "repo", "cric.json"), '{"queue":"TEST"}\n');
    env = await testEnv({ staging: { caFile: join(dir, "ca.pem"), maxRetries: 3, retryBaseMs: 20, localInputPrefixes: [software] } });
    x509 = await env.delegations.create(OWNER, "x509", { privateKeyPem: pki.proxy.keyPem });
    await env.delegations.storeProxy(x509, OWNER, pki.proxy.filePem, Date.now() + 3_600_000, pki.proxy.chainPem);
    jem = await testJem(env);
  }, 60_000);
  afterAll(async () => {
    await jem?.stop();
    await env?.close();
    await apache?.close();
  });

  it("downloads dav:// and davs:// inputs and uploads an output list to davs:// with checksums, creating collections", async () => {
    await mkdir(join(apache.docRoot, "in"), { recursive: true });
    await writeFile(join(apache.docRoot, "in", "evnt.root"), "event data\n");
    await writeFile(join(apache.docRoot, "in", "pilot.sh"), "echo pilot\n");
    const log = "log data\n";
    const hits = "hits payload\n";
    const outList = [
      `log.tgz ${apache.httpsUrl}/atlas/rucio/mc23/aa/bb/log.tgz:checksumtype=adler32:checksumvalue=${adler(log)}`,
      `HITS.pool.root.1 dav://${apache.httpUrl.slice("http://".length)};overwrite=yes/atlas/rucio/mc23/cc/dd/HITS.pool.root.1:checksumtype=adler32:checksumvalue=${adler(hits)}`,
    ]
      .join("\n")
      .replaceAll("https://", "davs://");
    const id = await submitTestJob(
      env,
      shellJob(
        `cat evnt.root pilot.sh > joined; printf '${log}' > log.tgz; printf '${hits}' > HITS.pool.root.1; cat > output.list <<'EOF2'\n${outList}\nEOF2`,
        {
          inputFiles: [
            {
              name: "evnt.root",
              source: `davs://${apache.httpsUrl.slice("https://".length)}/in/evnt.root`,
              executable: false,
              options: { cache: "invariant", httpgetpartial: "no" },
            },
            {
              name: "pilot.sh",
              source: `dav://${apache.httpUrl.slice("http://".length)}/in/pilot.sh`,
              executable: false,
              options: { checksum: `adler32` },
            },
          ],
          outputFiles: [output("@output.list"), output("joined")],
        },
      ),
      { mainDelegation: x509, delegations: [x509] },
    );
    const r = await waitForRest(env, id, ["FINISHED", "FAILED"], 30_000);
    expect(r?.failure).toBeUndefined();
    expect(r?.rest).toBe("FINISHED");
    expect(await readFile(join(env.control.sessionDir(id), "joined"), "utf8")).toBe("event data\necho pilot\n");
    expect(await readFile(join(apache.docRoot, "atlas/rucio/mc23/aa/bb/log.tgz"), "utf8")).toBe(log);
    expect(await readFile(join(apache.docRoot, "atlas/rucio/mc23/cc/dd/HITS.pool.root.1"), "utf8")).toBe(hits);
    const reqs = await apache.requests();
    // Apache answers 409 for a PUT into a missing collection; each level is created, parent first.
    expect(reqs.filter((q) => q.method === "MKCOL").map((q) => q.path)).toEqual(
      expect.arrayContaining(["/atlas/", "/atlas/rucio/mc23/aa/bb/", "/atlas/rucio/mc23/cc/dd/"]),
    );
    expect(reqs.some((q) => q.method === "PUT" && q.path === "/atlas/rucio/mc23/aa/bb/log.tgz" && q.status === 201)).toBe(true);
    expect(reqs.some((q) => q.method === "GET" && q.path === "/in/evnt.root" && q.status === 200)).toBe(true);
    const errors = await env.control.read(id, "errors");
    expect(errors).toContain(`adler32:${adler(log)}`);
  }, 40_000);

  it("uploads racing to create the same new collections all succeed", async () => {
    // Apache's mod_dav refuses a MKCOL (403) when another request created the directory between
    // its check and its mkdir: uploads side by side into one new tree (a job's outputs, several
    // jobs of one task) meet that.
    const client = transferClient(undefined, { connectTimeoutMs: 5_000, idleTimeoutMs: 10_000 });
    const dir = await mkdtemp(join(tmpdir(), "jem-dav-race-"));
    try {
      for (let round = 0; round < 5; round++) {
        const base = `${apache.httpUrl}/race/${round}/a/b/c`;
        const done = await Promise.allSettled(
          Array.from({ length: 24 }, async (_, i) => {
            const path = join(dir, `f${round}-${i}`);
            await writeFile(path, `${i}\n`);
            const handle = await open(path);
            try {
              return await upload(client, { handle, size: (await handle.stat()).size }, `${base}/f${i}`, {
                signal: new AbortController().signal,
              });
            } finally {
              await handle.close();
            }
          }),
        );
        const failed = done.flatMap((d) => (d.status === "rejected" ? [String(d.reason)] : []));
        expect(failed, failed.join("\n")).toEqual([]);
        expect(await readFile(join(apache.docRoot, `race/${round}/a/b/c/f23`), "utf8")).toBe("23\n");
      }
    } finally {
      await client.close();
      await rm(dir, { recursive: true, force: true });
    }
  }, 40_000);

  it("a wrong checksum in the output list fails the job naming both values, and nothing is sent", async () => {
    const list = `bad.dat ${apache.httpsUrl.replace("https://", "davs://")}/atlas/bad/bad.dat:checksumtype=adler32:checksumvalue=0badc0de`;
    const id = await submitTestJob(
      env,
      shellJob(`echo content > bad.dat; echo '${list}' > output.list`, {
        outputFiles: [output("@output.list")],
      }),
      { mainDelegation: x509, delegations: [x509] },
    );
    const r = await waitForRest(env, id, ["FINISHED", "FAILED"], 30_000);
    expect(r?.rest).toBe("FAILED");
    expect(r?.failure).toMatch(new RegExp(`bad\\.dat: adler32 checksum mismatch .*got ${adler("content\n")}, expected 0badc0de`));
    expect((await apache.requests()).some((q) => q.path.startsWith("/atlas/bad"))).toBe(false);
    expect(await env.control.read(id, "errors")).not.toMatch(/retry 1/);
  }, 40_000);

  it("a wrong checksum of a davs:// input fails at once (one GET)", async () => {
    await writeFile(join(apache.docRoot, "in", "corrupt.dat"), "xyz");
    const src = `${apache.httpsUrl.replace("https://", "davs://")}/in/corrupt.dat:checksumtype=md5:checksumvalue=00000000000000000000000000000000`;
    const id = await submitTestJob(
      env,
      shellJob("true", { inputFiles: [{ name: "corrupt.dat", source: src, executable: false, options: {} }] }),
      { mainDelegation: x509, delegations: [x509] },
    );
    const r = await waitForRest(env, id, ["FINISHED", "FAILED"], 30_000);
    expect(r?.failure).toMatch(/md5 checksum mismatch .*got d16fb36f0911f878998c136191af705e, expected 0{32}/);
    expect((await apache.requests()).filter((q) => q.path === "/in/corrupt.dat").length).toBe(1);
  }, 40_000);

  it("sends a token only to its audience: davs:// of that origin yes, dav:// (plain http) never", async () => {
    const token = testJwt(apache.httpsUrl);
    const jwt = await env.delegations.create(OWNER, "jwt", { token, expires: Date.now() + 3_600_000 });
    await writeFile(join(apache.docRoot, "in", "tok.txt"), "t\n");
    const ok = await submitTestJob(
      env,
      shellJob("cp tok.txt tok.out", {
        inputFiles: [
          { name: "tok.txt", source: `${apache.httpsUrl.replace("https://", "davs://")}/in/tok.txt`, executable: false, options: {} },
        ],
        outputFiles: [output("tok.out", { target: `${apache.httpsUrl.replace("https://", "davs://")}/tokens/tok.out` })],
      }),
      { mainDelegation: jwt, delegations: [jwt] },
    );
    expect((await waitForRest(env, ok, ["FINISHED", "FAILED"], 30_000))?.failure).toBeUndefined();
    const reqs = await apache.requests();
    expect(reqs.filter((q) => q.path === "/tokens/tok.out" && q.method === "PUT").every((q) => q.authorization === `Bearer ${token}`)).toBe(
      true,
    );
    const refused = await submitTestJob(
      env,
      shellJob("true", {
        inputFiles: [
          { name: "tok.txt", source: `${apache.httpUrl.replace("http://", "dav://")}/in/tok.txt`, executable: false, options: {} },
        ],
      }),
      { mainDelegation: jwt, delegations: [jwt] },
    );
    const r = await waitForRest(env, refused, ["FINISHED", "FAILED"], 30_000);
    expect(r?.failure).toMatch(/token not sent .*https only/);
    expect((await apache.requests()).filter((q) => q.path === "/in/tok.txt").length).toBe(1);
  }, 60_000);

  it("links an input from a listed software area; any other local path fails with the reason", async () => {
    const cric = join(software, "repo", "cric.json");
    const id = await submitTestJob(
      env,
      shellJob("cat cric.json > seen.txt", {
        inputFiles: [{ name: "cric.json", source: `file://${cric}`, executable: false, options: {} }],
        outputFiles: [output("seen.txt")],
      }),
      { mainDelegation: x509, delegations: [x509] },
    );
    const r = await waitForRest(env, id, ["FINISHED", "FAILED"], 30_000);
    expect(r?.failure).toBeUndefined();
    expect(await readFile(join(env.control.sessionDir(id), "seen.txt"), "utf8")).toBe('{"queue":"TEST"}\n');
    const bad = await submitTestJob(
      env,
      shellJob("true", {
        inputFiles: [{ name: "passwd", source: "file:///etc/passwd", executable: false, options: {} }],
      }),
      { mainDelegation: x509, delegations: [x509] },
    );
    const rb = await waitForRest(env, bad, ["FINISHED", "FAILED"], 30_000);
    expect(rb?.rest).toBe("FAILED");
    expect(rb?.failure).toMatch(/local input \/etc\/passwd is not under a software area/);
    const session = env.control.sessionDir(bad);
    expect(existsSync(join(session, "passwd")) ? await readlink(join(session, "passwd")).catch(() => "file") : "none").toBe("none");
  }, 40_000);
});
