/**
 * root:// staging against a real xrootd on loopback (anonymous; GSI is not exercised here), jobs
 * mapped to a real account (xrdcp runs as it); a root JEM without a mapped account refuses to run
 * xrdcp at all.
 */
import { readFile, mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Jem } from "../src/daemon.js";
import { checksummer } from "../src/staging/checksum.js";
import { TestAccounts } from "@ce/mapping/testing";
import type { LocalUser } from "@ce/model";
import { mappedAccount, mappedStateDir, output, shellJob, submitTestJob, testEnv, testJem, waitForRest, type TestEnv } from "./helpers.js";
import { haveXrootd, startXrootd, type Xrootd } from "@ce/testing/xrootd";

const adler = (s: string) => {
  const c = checksummer("adler32");
  c.update(Buffer.from(s));
  return c.digest();
};

let env: TestEnv;
let jem: Jem;
let xrd: Xrootd;
let localUser: LocalUser;
const accounts = new TestAccounts();

describe.skipIf(!haveXrootd())("xrootd staging", () => {
  beforeAll(async () => {
    xrd = await startXrootd();
    const m = await mappedAccount(accounts, "xs");
    localUser = m.localUser;
    env = await testEnv({ mapping: m.mapping, staging: { maxRetries: 2, retryBaseMs: 20 } });
    await mappedStateDir(env);
    jem = await testJem(env);
  }, 60_000);
  afterAll(async () => {
    await jem?.stop();
    await env?.close();
    await xrd?.close();
    await accounts.remove();
  });

  it("downloads a root:// input and uploads an output list to root:// with the server's adler32 checked", async () => {
    await mkdir(join(xrd.dataDir, "in"), { recursive: true });
    await writeFile(join(xrd.dataDir, "in", "evnt.root"), "xrootd input\n");
    const out = "hits\n";
    const id = await submitTestJob(
      env,
      shellJob(
        `cp evnt.root copy.txt; printf '${out}' > HITS.1; echo 'HITS.1 ${xrd.url}//atlas/x/y/HITS.1:checksumtype=adler32:checksumvalue=${adler(out)}' > output.list`,
        {
          inputFiles: [{ name: "evnt.root", source: `${xrd.url}//in/evnt.root`, executable: false, options: { checksum: "adler32" } }],
          outputFiles: [output("@output.list"), output("copy.txt")],
        },
      ),
      { localUser },
    );
    const r = await waitForRest(env, id, ["FINISHED", "FAILED"], 40_000);
    expect(r?.failure).toBeUndefined();
    expect(await readFile(join(env.control.sessionDir(id), "copy.txt"), "utf8")).toBe("xrootd input\n");
    expect(await readFile(join(xrd.dataDir, "atlas/x/y/HITS.1"), "utf8")).toBe(out);
  }, 60_000);

  it("a missing root:// input fails the job with xrdcp's reason", async () => {
    const id = await submitTestJob(
      env,
      shellJob("true", { inputFiles: [{ name: "nope", source: `${xrd.url}//in/nope`, executable: false, options: {} }] }),
      { localUser },
    );
    const r = await waitForRest(env, id, ["FINISHED", "FAILED"], 40_000);
    expect(r?.rest).toBe("FAILED");
    expect(r?.failure).toMatch(/nope: xrdcp root:\/\/localhost:\d+\/\/in\/nope: .*(No such file|not found)/i);
  }, 60_000);
});

describe.skipIf(!haveXrootd())("xrootd staging by a root JEM without mapping", () => {
  let plain: TestEnv;
  let plainJem: Jem;
  let server: Xrootd;
  beforeAll(async () => {
    server = await startXrootd();
    plain = await testEnv({ staging: { maxRetries: 2, retryBaseMs: 20 } });
    plainJem = await testJem(plain);
  }, 60_000);
  afterAll(async () => {
    await plainJem?.stop();
    await plain?.close();
    await server?.close();
  });

  it("refuses to run xrdcp as root: the input fails at once with the reason", async () => {
    await mkdir(join(server.dataDir, "in"), { recursive: true });
    await writeFile(join(server.dataDir, "in", "f"), "x\n");
    const id = await submitTestJob(
      plain,
      shellJob("true", { inputFiles: [{ name: "f", source: `${server.url}//in/f`, executable: false, options: {} }] }),
    );
    const r = await waitForRest(plain, id, ["FINISHED", "FAILED"], 40_000);
    expect(r?.rest).toBe("FAILED");
    expect(r?.failure).toMatch(/f: root:\/\/localhost:\d+\/\/in\/f: transfer tools never run as root, and this job has no mapped account/);
    expect(await plain.control.read(id, "errors")).not.toMatch(/retry 1/);
  }, 60_000);
});
