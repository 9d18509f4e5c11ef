import { existsSync, mkdtempSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Jem } from "../src/daemon.js";
import { output, shellJob, submitTestJob, testEnv, testJem, waitForRest, type TestEnv } from "./helpers.js";

// ADL PreExecutable/PostExecutable through the JEM on the fork back end: the wrapper runs them
// around the payload in the session dir, and a failing one fails the job with its name and code.

let env: TestEnv;
let jem: Jem;

beforeAll(async () => {
  env = await testEnv();
  jem = await testJem(env);
});
afterAll(async () => {
  await jem?.stop();
  await env?.close();
});

const sh = (script: string, ...args: string[]) => ({ path: "/bin/sh", arguments: ["-c", script, "sh", ...args] });

describe("pre- and post-executables", () => {
  it("a pre-executable prepares a file the payload reads; a post-executable reads the payload's output", async () => {
    const id = await submitTestJob(
      env,
      shellJob("cat prepared.txt; echo payload-line", {
        stdout: "out.txt",
        preExecutables: [sh('echo "prepared $1|$2" > prepared.txt; echo pre-said', "a b", "c")],
        postExecutables: [sh("grep -c payload-line out.txt > post.txt")],
        outputFiles: [output("out.txt"), output("post.txt")],
      }),
    );
    const r = await waitForRest(env, id, ["FINISHED", "FAILED"]);
    expect(r?.failure).toBeUndefined();
    expect(r?.rest).toBe("FINISHED");
    const session = env.control.sessionDir(id);
    // What the pre-executable printed stays in stdout, before the payload's lines.
    expect(await readFile(join(session, "out.txt"), "utf8")).toBe("pre-said\nprepared a b|c\npayload-line\n");
    expect(await readFile(join(session, "post.txt"), "utf8")).toBe("1\n");
  });

  it("a pre-executable that ends with another code than expected fails the job, names itself, and the payload never runs", async () => {
    const marker = join(mkdtempSync(join(tmpdir(), "prepost-")), "payload-ran");
    const id = await submitTestJob(
      env,
      shellJob(`touch '${marker}'`, {
        preExecutables: [
          { path: "/bin/true", arguments: [] },
          { ...sh("exit 3"), successExitCode: 0 },
        ],
        postExecutables: [sh(`touch '${marker}.post'`)],
      }),
    );
    const r = await waitForRest(env, id, ["FINISHED", "FAILED"]);
    expect(r?.rest).toBe("FAILED");
    expect(r?.failure).toBe("LRMS error: (3) Pre-executable 2 (/bin/sh) exited with code 3, expected 0");
    expect(r?.failedCause).toBe("user");
    expect(await env.control.read(id, "failed")).toMatch(/Pre-executable 2 \(\/bin\/sh\) exited with code 3/);
    expect(existsSync(marker)).toBe(false);
    expect(existsSync(`${marker}.post`)).toBe(false);
  });

  it("a post-executable that fails after a successful payload fails the job; its expected code is honoured", async () => {
    const id = await submitTestJob(
      env,
      shellJob("exit 0", {
        postExecutables: [
          { ...sh("exit 4"), successExitCode: 4 },
          { ...sh("exit 0"), successExitCode: 5 },
        ],
      }),
    );
    const r = await waitForRest(env, id, ["FINISHED", "FAILED"]);
    expect(r?.rest).toBe("FAILED");
    // Exit code 0 would read as success: the job ends with 1 and the text says what happened.
    expect(r?.failure).toBe("LRMS error: (1) Post-executable 2 (/bin/sh) exited with code 0, expected 5");
  });
});
