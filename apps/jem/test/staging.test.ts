import { existsSync } from "node:fs";
import { mkdtemp, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Jem } from "../src/daemon.js";
import { checksummer } from "../src/staging/checksum.js";
import { OWNER, output, shellJob, submitTestJob, testEnv, testJem, waitForRest, type TestEnv } from "./helpers.js";
import { startStorage, testPki, type Storage, type TestPki } from "@ce/testing/storage";

let env: TestEnv;
let jem: Jem;
let storage: Storage;
let pki: TestPki;
let x509Delegation: string;
let jwtDelegation: string;

const adler = (s: string) => {
  const c = checksummer("adler32");
  c.update(Buffer.from(s));
  return c.digest();
};

beforeAll(async () => {
  pki = testPki();
  storage = await startStorage(pki);
  const caFile = join(await mkdtemp(join(tmpdir(), "jem-ca-")), "ca.pem");
  await writeFile(caFile, storage.caPem);
  env = await testEnv({ staging: { caFile, maxRetries: 3, retryBaseMs: 20 } });
  x509Delegation = await env.delegations.create(OWNER, "x509", { privateKeyPem: pki.proxy.keyPem });
  await env.delegations.storeProxy(x509Delegation, OWNER, pki.proxy.filePem, Date.now() + 3_600_000, pki.proxy.chainPem);
  jwtDelegation = await env.delegations.create(OWNER, "jwt", { token: storage.token, expires: Date.now() + 3_600_000 });
  jem = await testJem(env);
});
afterAll(async () => {
  await jem?.stop();
  await env?.close();
  await storage?.close();
});

describe("remote staging over HTTPS", () => {
  it("downloads and uploads with an X.509 proxy as TLS client certificate (retry, checksum, MKCOL)", async () => {
    storage.files.set("/x509/data/in.txt", Buffer.from("remote input\n"));
    storage.flaky("/x509/data/in.txt", 1);
    const id = await submitTestJob(
      env,
      shellJob("tr a-z A-Z < in.txt > out.txt; mkdir -p res; echo r1 > res/a.txt; echo keep > local.txt", {
        inputFiles: [
          {
            name: "in.txt",
            source: `${storage.url}/x509/data/in.txt`,
            checksum: `adler32:${adler("remote input\n")}`,
            executable: false,
            options: {},
          },
        ],
        outputFiles: [
          output("out.txt", { target: `${storage.url}/x509/results/deep/out.txt` }),
          output("res/", { target: `${storage.url}/x509/results/dir/` }),
          output("local.txt"),
        ],
      }),
      { mainDelegation: x509Delegation, delegations: [x509Delegation] },
    );
    const r = await waitForRest(env, id, ["FINISHED", "FAILED"]);
    expect(r?.failure).toBeUndefined();
    expect(r?.rest).toBe("FINISHED");
    expect(storage.files.get("/x509/results/deep/out.txt")?.toString()).toBe("REMOTE INPUT\n");
    expect(storage.files.get("/x509/results/dir/a.txt")?.toString()).toBe("r1\n");
    const gets = storage.requests.filter((q) => q.path === "/x509/data/in.txt");
    expect(gets.length).toBe(2); // one 503, one retry
    expect(gets.every((q) => q.peer && /^Test User\/\d+$/.test(q.peer))).toBe(true); // user CN + the proxy's numeric CN
    expect(storage.requests.some((q) => q.method === "MKCOL" && q.path === "/x509/results/deep/")).toBe(true);
    const session = env.control.sessionDir(id);
    expect(existsSync(join(session, "out.txt"))).toBe(false); // uploaded copies are removed
    expect(existsSync(join(session, "in.txt"))).toBe(false); // purged: not an output
    expect(await readFile(join(session, "local.txt"), "utf8")).toBe("keep\n");
    expect(await env.control.read(id, "output_status")).toContain("/out.txt ");
    expect(await env.control.read(id, "input_status")).toContain("/in.txt");
    expect(await env.control.read(id, "statistics")).toMatch(/inputfile:url=.*in\.txt,size=13,/);
    expect(await env.control.read(id, "errors")).toMatch(/retry 1/);
    // The batch job's proxy file goes once the batch job is over, not at the wipe.
    expect(await env.control.read(id, "proxy")).toBeUndefined();
  });

  it("uses a token delegation as a bearer token and writes no proxy file", async () => {
    storage.files.set("/token/in.bin", Buffer.from("tok"));
    const id = await submitTestJob(
      env,
      shellJob("cat in.bin in.bin > out.bin", {
        inputFiles: [{ name: "in.bin", source: `${storage.url}/token/in.bin`, executable: false, options: {} }],
        outputFiles: [output("out.bin", { target: `${storage.url}/token/out.bin` })],
      }),
      { mainDelegation: jwtDelegation, delegations: [jwtDelegation] },
    );
    const r = await waitForRest(env, id, ["FINISHED", "FAILED"]);
    expect(r?.failure).toBeUndefined();
    expect(storage.files.get("/token/out.bin")?.toString()).toBe("toktok");
    expect(storage.requests.filter((q) => q.path.startsWith("/token/")).every((q) => q.authorization === `Bearer ${storage.token}`)).toBe(
      true,
    );
    expect(await env.control.read(id, "proxy")).toBeUndefined();
  });

  it("a failed mandatory download fails the job in PREPARING", async () => {
    const id = await submitTestJob(
      env,
      shellJob("true", {
        inputFiles: [{ name: "missing.txt", source: `${storage.url}/x509/nope.txt`, executable: false, options: {} }],
      }),
      { mainDelegation: x509Delegation, delegations: [x509Delegation] },
    );
    const r = await waitForRest(env, id, ["FINISHED", "FAILED"]);
    expect(r?.rest).toBe("FAILED");
    expect(r?.failedState).toBe("PREPARING");
    expect(r?.failure).toMatch(/^Failed in data staging: missing\.txt: GET .* HTTP 404/);
    // A URL that names nothing is the user's to fix, not the site's.
    expect(r?.failedCause).toBe("user");
  });

  it("a checksum mismatch fails at once, naming both values (not retried as transient)", async () => {
    storage.files.set("/x509/sum.txt", Buffer.from("abc"));
    const id = await submitTestJob(
      env,
      shellJob("true", {
        inputFiles: [
          {
            name: "sum.txt",
            source: `${storage.url}/x509/sum.txt`,
            checksum: "md5:00000000000000000000000000000000",
            executable: false,
            options: {},
          },
        ],
      }),
      { mainDelegation: x509Delegation, delegations: [x509Delegation] },
    );
    const r = await waitForRest(env, id, ["FINISHED", "FAILED"]);
    expect(r?.failure).toMatch(/md5 checksum mismatch .*: got 900150983cd24fb0d6963f7d28e17f72, expected 00000000000000000000000000000000/);
    expect(storage.requests.filter((q) => q.path === "/x509/sum.txt").length).toBe(1);
  });

  it("an upload failure ends FAILED from FINISHING, keeping the other outputs", async () => {
    const id = await submitTestJob(
      env,
      shellJob("echo a > a.txt; echo b > b.txt", {
        outputFiles: [output("a.txt", { target: `${storage.url}/x509/a.txt` }), output("b.txt", { target: `${storage.url}/token/b.txt` })],
      }),
      { mainDelegation: x509Delegation, delegations: [x509Delegation] },
    );
    const r = await waitForRest(env, id, ["FINISHED", "FAILED"]);
    expect(r?.rest).toBe("FAILED");
    expect(r?.failedState).toBe("FINISHING");
    expect(r?.failure).toMatch(/b\.txt: PUT .* HTTP 401/);
    expect(r?.failedCause).toBe("user");
    expect(storage.files.get("/x509/a.txt")?.toString()).toBe("a\n");
    expect(existsSync(join(env.control.sessionDir(id), "b.txt"))).toBe(true);
  });

  it("an output.list line whose URL says failureallowed=yes (the pilot's object-store line) does not fail the job", async () => {
    // production-site.md §1.4: the pilot writes S3 object-store outputs as rucio://…;failureallowed=yes/objectstores/…
    const lines = [
      `kept.txt ${storage.url}/x509/list/kept.txt`,
      "os.log rucio://127.0.0.1:1;failureallowed=yes/objectstores/s3+rucio://os.example.org:443/ATLAS_OS/write",
      `denied.txt ${storage.url};failureallowed=yes/token/denied.txt`,
    ].join("\n");
    const id = await submitTestJob(
      env,
      shellJob(`echo k > kept.txt; echo o > os.log; echo d > denied.txt; printf '${lines}\\n' > out.list`, {
        outputFiles: [output("@out.list")],
      }),
      { mainDelegation: x509Delegation, delegations: [x509Delegation] },
    );
    const r = await waitForRest(env, id, ["FINISHED", "FAILED"]);
    expect(r?.failure).toBeUndefined();
    expect(r?.rest).toBe("FINISHED");
    expect(storage.files.get("/x509/list/kept.txt")?.toString()).toBe("k\n");
    const errors = await env.control.read(id, "errors");
    expect(errors).toMatch(/upload of \/os\.log to .* failed: Unsupported protocol rucio/);
    expect(errors).toContain(
      `upload of /denied.txt to ${storage.url}/token/denied.txt failed: PUT ${storage.url}/token/denied.txt: HTTP 401`,
    );
  });

  it("an output the job did not produce is the user's failure; storage that keeps failing is the site's", async () => {
    const none = await submitTestJob(
      env,
      shellJob("true", { outputFiles: [output("never.txt", { target: `${storage.url}/x509/never.txt` })] }),
      {
        mainDelegation: x509Delegation,
        delegations: [x509Delegation],
      },
    );
    const r1 = await waitForRest(env, none, ["FINISHED", "FAILED"]);
    expect(r1?.rest).toBe("FAILED");
    expect(r1?.failure).toMatch(/never\.txt/);
    expect(r1?.failedCause).toBe("user");
    storage.flaky("/x509/down.txt", 100); // more 503s than the retries
    const down = await submitTestJob(
      env,
      shellJob("true", {
        inputFiles: [{ name: "down.txt", source: `${storage.url}/x509/down.txt`, executable: false, options: {} }],
      }),
      { mainDelegation: x509Delegation, delegations: [x509Delegation] },
    );
    const r2 = await waitForRest(env, down, ["FINISHED", "FAILED"]);
    expect(r2?.failure).toMatch(/HTTP 503/);
    expect(r2?.failedCause).toBe("internal");
  });
});
