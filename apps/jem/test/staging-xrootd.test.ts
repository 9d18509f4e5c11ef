/** root:// staging against a real xrootd on loopback (anonymous; GSI is not exercised here). */
import { readFile, mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Jem } from "../src/daemon.js";
import { checksummer } from "../src/staging/checksum.js";
import { output, shellJob, submitTestJob, testEnv, testJem, waitForRest, type TestEnv } from "./helpers.js";
import { haveXrootd, startXrootd, type Xrootd } from "@ce/testing/xrootd";

const adler = (s: string) => {
  const c = checksummer("adler32");
  c.update(Buffer.from(s));
  return c.digest();
};

let env: TestEnv;
let jem: Jem;
let xrd: Xrootd;

describe.skipIf(!haveXrootd())("xrootd staging", () => {
  beforeAll(async () => {
    xrd = await startXrootd();
    env = await testEnv({ staging: { maxRetries: 2, retryBaseMs: 20 } });
    jem = await testJem(env);
  }, 60_000);
  afterAll(async () => {
    await jem?.stop();
    await env?.close();
    await xrd?.close();
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
    );
    const r = await waitForRest(env, id, ["FINISHED", "FAILED"], 40_000);
    expect(r?.rest).toBe("FAILED");
    expect(r?.failure).toMatch(/nope: xrdcp root:\/\/localhost:\d+\/\/in\/nope: .*(No such file|not found)/i);
  }, 60_000);
});
