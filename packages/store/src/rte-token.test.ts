import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { declaredNeeds, enableRte, rteNeeds, SHIPPED_RTE_DIR, type RteConfig } from "./rte.js";

// What an RTE needs (`# needs:` in its header, ARC's ENV/PROXY known), read by the gateway to
// refuse a job up front, and the shipped ENV/TOKEN script by itself: stage 0 says when there is no
// token, stage 1 names the file. tests/tokens/token-jobs.test.ts runs it in real jobs.

const TOKEN = fileURLToPath(new URL("../rte/ENV/TOKEN", import.meta.url));
let dir: string;
let cfg: RteConfig;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "ce-rte-needs-"));
  cfg = {
    paths: { controlDir: join(dir, "control"), rteDir: join(dir, "rte") },
    jobs: { runtimeEnvironments: [], defaultRuntimeEnvironments: [] },
  };
  mkdirSync(join(dir, "rte", "SITE"), { recursive: true });
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("what an RTE needs", () => {
  it("is what its header declares; a `needs:` line after the first line of code does not count", () => {
    expect(declaredNeeds("#!/bin/bash\n# description: x\n#   needs: proxy, token\n\necho hi\n")).toEqual(["proxy", "token"]);
    expect(declaredNeeds("# needs: Token\n# needs: nothing-else\n")).toEqual(["token"]);
    expect(declaredNeeds("echo hi\n# needs: proxy\n")).toEqual([]);
    expect(declaredNeeds('cat "${joboption_controldir}/job.${joboption_gridid}.proxy"\n')).toEqual([]);
  });

  it("finds the script of an enabled or rteDir RTE; ENV/PROXY needs a proxy without saying so; ENV/TOKEN a token", () => {
    writeFileSync(join(dir, "rte", "SITE", "GRID-1.0"), "# reads the job's proxy\n# needs: proxy\ncp x y\n");
    expect(rteNeeds(cfg, "SITE/GRID-1.0")).toEqual(["proxy"]);
    expect(rteNeeds(cfg, "SITE/MISSING")).toEqual([]);
    expect(rteNeeds(cfg, "ENV/PROXY")).toEqual(["proxy"]);
    expect(enableRte(cfg, "ENV/TOKEN")).toBe(join(SHIPPED_RTE_DIR, "ENV", "TOKEN"));
    expect(rteNeeds(cfg, "ENV/TOKEN")).toEqual(["token"]);
  });
});

describe("the shipped ENV/TOKEN script", () => {
  const stage = (n: number, env: Record<string, string>) =>
    spawnSync(
      "bash",
      ["--norc", "-c", 'source "$0" "$1"; rc=$?; echo "rc=$rc BEARER_TOKEN_FILE=${BEARER_TOKEN_FILE-unset}"', TOKEN, String(n)],
      {
        encoding: "utf8",
        env: { PATH: "/usr/bin:/bin", ...env },
      },
    );

  it("stage 0: one line in the job's errors (stderr) when the job has no token, nothing when it has one", () => {
    const none = stage(0, { JOB_TOKEN_FILE: "" });
    expect(none.stdout).toBe("rc=0 BEARER_TOKEN_FILE=unset\n");
    expect(none.stderr).toBe("ENV/TOKEN: the job has no token delegation (X-Token-Delegation), so BEARER_TOKEN_FILE is not set\n");
    expect(stage(0, { JOB_TOKEN_FILE: join(dir, "t") }).stderr).toBe("");
  });

  it("stage 1: BEARER_TOKEN_FILE names the token file when it is there; never fails the job", () => {
    const file = join(dir, "tok");
    writeFileSync(file, "T", { mode: 0o600 });
    expect(stage(1, { JEM_TOKEN_FILE: file }).stdout).toBe(`rc=0 BEARER_TOKEN_FILE=${file}\n`);
    const gone = stage(1, { JEM_TOKEN_FILE: join(dir, "nope") });
    expect(gone.stdout).toBe("rc=0 BEARER_TOKEN_FILE=unset\n");
    expect(gone.stderr).toMatch(/is not on this node/);
    expect(stage(1, {}).stdout).toBe("rc=0 BEARER_TOKEN_FILE=unset\n");
    expect(stage(2, { JEM_TOKEN_FILE: file }).stdout).toBe("rc=0 BEARER_TOKEN_FILE=unset\n");
  });
});
