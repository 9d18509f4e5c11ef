import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { JobStore, Keys } from "@ce/store";
import { ControlDir } from "@ce/controldir";
import { table } from "./cli.js";
import { colourWanted } from "./cli/colour.js";
import { findConfigFile } from "./cli/config-file.js";

const run = promisify(execFile);
const root = fileURLToPath(new URL("../../..", import.meta.url));
const prefix = `{ops-c-${randomBytes(4).toString("hex")}}`;
let redis: Redis;
const dir = mkdtempSync(join(tmpdir(), "ceadm-test-"));
const control = new ControlDir(join(dir, "control"), join(dir, "sessions"));

/** Spawns `ceadm` exactly as `pnpm ceadm` does (node --import tsx), configured through CE__* only. */
async function ceadm(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return ceadmIn(root, {}, ...args);
}

/** As `ceadm`, from working directory `cwd`, with `env` over the test's (undefined: removed). */
async function ceadmIn(cwd: string, extra: Record<string, string | undefined>, ...args: string[]) {
  const env: Record<string, string | undefined> = {
    ...process.env,
    CE__REDIS__URL: inject("redisUrl"),
    CE__REDIS__PREFIX: prefix,
    CE_CONFIG: "",
    CE__PATHS__CONTROL_DIR: control.root,
    CE__PATHS__SESSION_ROOT: control.sessionRoot,
    CE__LOGGING__JEM_LOG_FILE: join(dir, "jem.log"),
    ...extra,
  };
  for (const k of Object.keys(env)) if (env[k] === undefined) delete env[k];
  const loader = pathToFileURL(join(root, "node_modules/tsx/dist/loader.mjs")).href;
  try {
    const { stdout, stderr } = await run(process.execPath, ["--import", loader, join(root, "packages/ops/src/cli.ts"), ...args], {
      cwd,
      env: env as NodeJS.ProcessEnv,
    });
    return { code: 0, stdout, stderr };
  } catch (e) {
    const err = e as { code: number; stdout: string; stderr: string };
    return { code: err.code, stdout: err.stdout, stderr: err.stderr };
  }
}

beforeAll(async () => {
  redis = new Redis(inject("redisUrl"));
  const store = new JobStore(redis, prefix);
  const rec = (id: string, owner: string) =>
    JobStore.newRecord({ id, owner, queue: "main", backend: "fork", language: "xrsl", delegations: [], rerun: 0, lifetime: 60 });
  const mapped = {
    ...rec("c1", "/DC=org/CN=alice"),
    jobName: "calibration-run-42",
    fqans: ["/atlas/Role=production"],
    localUser: { account: "grid007", uid: 5007, gid: 100, groups: [100, 5000], rule: "mapping.rules[1] pool atlas" },
  };
  await store.create([mapped, rec("c2", "/DC=org/CN=bob")], 100);
  // c2 has sat in ACCEPTED for 7 hours (stuck past the 6 h default); c1 failed a minute ago. Its AGE
  // reads 7h, or 7h1m… once this file has run longer than a minute (a loaded machine).
  await store.update((await store.get("c2"))!, { stateSince: Date.now() - 7 * 3_600_000 });
  await store.update((await store.get("c1"))!, {
    failure: "Walltime exceeded: 3600 s limit",
    failedCause: "user",
    failedState: "INLRMS",
    exitCode: 271,
  });
});
afterAll(async () => {
  await redis.quit();
  rmSync(dir, { recursive: true, force: true });
});

describe("ceadm", () => {
  it("colours a table only when asked (a TTY without NO_COLOR), padding outside the codes", () => {
    const painted = table(["A", "STATE"], [["x", "FAILED"]], {
      colour: true,
      paintCell: (col, v) => (col === 1 && v === "FAILED" ? "red" : undefined),
    });
    expect(painted).toBe("\x1b[1mA\x1b[0m  \x1b[1mSTATE\x1b[0m\nx  \x1b[31mFAILED\x1b[0m");
    expect(colourWanted({ isTTY: true }, {})).toBe(true);
    expect(colourWanted({ isTTY: true }, { NO_COLOR: "1" })).toBe(false);
    expect(colourWanted({ isTTY: true }, { TERM: "dumb" })).toBe(false);
    expect(colourWanted({ isTTY: false }, {})).toBe(false);
  });

  it("finds .ce/ce.yaml up from the working directory like git, says so; CE_CONFIG or --config win", async () => {
    const top = mkdtempSync(join(tmpdir(), "ceadm-find-"));
    const deep = join(top, "a", "b");
    mkdirSync(join(top, ".ce"), { recursive: true });
    mkdirSync(deep, { recursive: true });
    // The prefix only in the file: a ceadm that did not read it would see another (empty) CE.
    writeFileSync(join(top, ".ce", "ce.yaml"), `redis:\n  prefix: "${prefix}"\n`);
    expect(findConfigFile(deep)).toBe(join(top, ".ce", "ce.yaml"));
    const found = await ceadmIn(deep, { CE_CONFIG: undefined, CE__REDIS__PREFIX: undefined }, "--json", "stats");
    expect(found.code).toBe(0);
    expect(found.stderr).toContain(`ceadm: using ${join(top, ".ce", "ce.yaml")}`);
    expect(JSON.parse(found.stdout).total).toBeGreaterThanOrEqual(2);
    // CE_CONFIG set (here empty: none) turns the search off.
    const explicit = await ceadmIn(deep, { CE__REDIS__PREFIX: undefined }, "--json", "stats");
    expect(explicit.stderr).not.toContain("ceadm: using");
    expect(JSON.parse(explicit.stdout).total).toBe(0);
    rmSync(top, { recursive: true, force: true });
  }, 90_000);

  it("aligns table columns", () => {
    expect(
      table(
        ["A", "BB"],
        [
          ["xxx", 1],
          [undefined, 22],
        ],
      ),
    ).toBe("A    BB\nxxx  1\n-    22");
  });

  it("lists jobs as a table and as JSON, filtered by owner and state", async () => {
    const human = await ceadm("jobs", "list");
    expect(human.code).toBe(0);
    expect(human.stdout).toMatch(/^ID\s+STATE\s+INTERNAL\s+AGE\s+NAME\s+ACCOUNT\s+VO\s+QUEUE\s+OWNER/);
    expect(human.stdout).toMatch(
      /c1\s+ACCEPTING\s+ACCEPTED\s+\d+(?:m(?:\d+s)?|s)\s+calibration-run-42\s+grid007\s+atlas\s+main\s+\/DC=org\/CN=alice/,
    );
    // One name for "no VO" everywhere (NO_VO of @ce/model, as the pages); no colour into a pipe.
    expect(human.stdout).toMatch(/c2\s+ACCEPTING\s+ACCEPTED\s+7h(?:\dm)?\s+-\s+-\s+\(no VO\)\s+main/);
    expect(human.stdout).not.toContain("\x1b[");
    expect(human.stdout).toContain("/DC=org/CN=alice");
    expect(human.stdout).toContain("2 of 2 job(s)");
    const json = JSON.parse((await ceadm("--json", "jobs", "list", "--owner", "/DC=org/CN=bob", "--state", "ACCEPTING")).stdout);
    expect(json).toMatchObject({ total: 1, jobs: [{ id: "c2", rest: "ACCEPTING" }] });
    const bad = await ceadm("jobs", "list", "--state", "NOPE");
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain("unknown state NOPE");
  });

  it("shows one job, and fails cleanly for a missing one", async () => {
    const shown = JSON.parse((await ceadm("jobs", "show", "c1", "--json")).stdout);
    expect(shown).toMatchObject({
      id: "c1",
      owner: "/DC=org/CN=alice",
      state: "ACCEPTED",
      localUser: { account: "grid007", uid: 5007, gid: 100 },
    });
    const human = (await ceadm("jobs", "show", "c1")).stdout;
    // State and failure come first, then who and where; not every raw field.
    expect(human.split("\n").slice(0, 5)).toEqual([
      "Job c1",
      expect.stringMatching(/^  State +ACCEPTING \(ACCEPTED\) for \d+(?:m(?:\d+s)?|s), since /),
      "  Failure    Walltime exceeded: 3600 s limit",
      "             Ask for more time: (walltime=<minutes>) in xRSL, <IndividualWallTime> (seconds) in ADL.",
      "  Failed     cause user, in INLRMS (restart point), 0 restart(s) left",
    ]);
    expect(human).toMatch(/  Account +grid007 \(uid 5007, gid 100, groups 100,5000; by mapping\.rules\[1\] pool atlas\)\n/);
    expect(human).toMatch(/  VO +atlas \(\/atlas\/Role=production\)\n/);
    expect(human).not.toContain("ownerKey");
    expect((await ceadm("jobs", "show", "--all", "c1")).stdout).toMatch(
      /localUser\s+grid007 \(uid 5007, gid 100, groups 100,5000; by mapping\.rules\[1\] pool atlas\)\n/,
    );
    const missing = await ceadm("jobs", "show", "zz");
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain("job zz not found");
  });

  it("records kill and clean requests on the records, rings the jobs, and counts the queues", async () => {
    const k = new Keys(prefix);
    await redis.zrem(k.advanceDue(), "c1", "c2");
    expect((await ceadm("jobs", "kill", "c1")).stdout).toContain("kill of job c1 queued");
    expect((await ceadm("jobs", "clean", "c2")).code).toBe(0);
    expect(await redis.hget(k.job("c1"), "killRequested")).toBe("1");
    expect(await redis.hget(k.job("c2"), "cleanRequested")).toBe("1");
    expect(await redis.zscore(k.advanceDue(), "c1")).not.toBeNull();
    expect(await redis.zscore(k.advanceDue(), "c2")).not.toBeNull();
    const counts = JSON.parse((await ceadm("queues", "--json")).stdout);
    expect(Object.keys(counts).sort()).toEqual(["advance", "staging"]);
    expect(counts.advance.waiting).toBeGreaterThanOrEqual(2);
    const human = (await ceadm("queues")).stdout;
    expect(human).toMatch(/^QUEUE\s+WAITING\s+ACTIVE\s+DELAYED\s+FAILED\s+COMPLETED\s+PAUSED/);
    expect(human).toMatch(/staging\s+0\s+0/);
  });

  it("switches drain on and off", async () => {
    expect((await ceadm("drain", "on")).stdout).toContain("new jobs are refused");
    expect(await redis.hget(new Keys(prefix).flags(), "drain")).toBe("1");
    expect(JSON.parse((await ceadm("drain", "status", "--json")).stdout)).toMatchObject({ draining: true });
    expect((await ceadm("drain", "off")).stdout).toContain("not draining");
    expect(await redis.hget(new Keys(prefix).flags(), "drain")).toBeNull();
    expect((await ceadm("drain", "maybe")).code).toBe(2);
  });

  it("prints jobs per state", async () => {
    const out = (await ceadm("stats")).stdout;
    expect(out).toMatch(/ACCEPTING\s+2/);
    expect(out).toMatch(/TOTAL\s+2/);
    expect(JSON.parse((await ceadm("stats", "--json")).stdout)).toMatchObject({ total: 2, states: { ACCEPTING: 2, RUNNING: 0 } });
  });

  it("shows the input cache's counters and files, and asks the JEMs for a clean", async () => {
    await redis.hset(new Keys(prefix).cacheStats(), { hits: 19, misses: 1, bytesSaved: 247 });
    expect(JSON.parse((await ceadm("cache", "stats", "--json")).stdout)).toMatchObject({
      hits: 19,
      misses: 1,
      refused: 0,
      bytesSaved: 247,
      dirs: [],
    });
    // Sizes for people in the table; --json keeps the exact bytes.
    expect((await ceadm("cache", "stats")).stdout).toMatch(/^hits 19 {2}misses 1 {2}refused 0 {2}saved 247 B$/m);
    const off = await ceadm("cache", "clean");
    expect(off.code).toBe(1);
    expect(off.stderr).toContain("no cache directories are configured");
    const dir = mkdtempSync(join(tmpdir(), "ceadm-cache-"));
    mkdirSync(join(dir, "data", "ab"), { recursive: true });
    writeFileSync(join(dir, "data", "ab", "ab12"), "cached");
    writeFileSync(join(dir, "data", "ab", "ab12.meta"), JSON.stringify({ url: "https://origin.test/f" }));
    const cfg = join(dir, "ce.yaml");
    writeFileSync(cfg, `staging:\n  cache:\n    dirs:\n      - path: ${dir}\n`);
    const listed = JSON.parse((await ceadm("--config", cfg, "cache", "list", "--json")).stdout);
    expect(listed).toMatchObject([{ hash: "ab12", url: "https://origin.test/f", size: 6, links: 0 }]);
    expect((await ceadm("--config", cfg, "cache", "list")).stdout).toMatch(/^ab12\s+6 B\s+0\s/m);
    expect((await ceadm("--config", cfg, "cache", "clean")).stdout).toContain("cache clean requested");
    expect(await redis.get(new Keys(prefix).cacheCleanRequest())).not.toBeNull();
    // Seven ceadm processes: each compiles the CLI with tsx first.
  }, 90_000);

  it("lists jobs past their age in state, oldest first", async () => {
    const res = await ceadm("jobs", "stuck");
    expect(res.code).toBe(0);
    expect(res.stdout).toMatch(/^ID\s+STATE\s+INTERNAL\s+AGE\s+LIMIT/);
    expect(res.stdout).toMatch(/c2\s+ACCEPTING\s+ACCEPTED\s+7h(?:\dm)?\s+6h/);
    expect(res.stdout).not.toMatch(/^c1 /m);
    expect(
      JSON.parse((await ceadm("--json", "jobs", "stuck", "--older-than", "0s", "--state", "accepted")).stdout).jobs.map(
        (j: { id: string }) => j.id,
      ),
    ).toEqual(["c2", "c1"]);
    expect((await ceadm("jobs", "stuck", "--state", "INLRMS")).stderr).toContain("INLRMS has no default age: give --older-than");
    expect((await ceadm("jobs", "stuck", "--older-than", "soon")).stderr).toContain('bad duration "soon"');
  });

  it("summarizes jobs by VO, owner and state", async () => {
    const res = await ceadm("summary");
    expect(res.stdout).toMatch(/^VO\s+TOTAL\s+ACCEPTING\n/);
    expect(res.stdout).toMatch(/^atlas\s+1\s+1$/m);
    expect(res.stdout).toMatch(/^\(no VO\)\s+1\s+1$/m);
    expect(res.stdout).toMatch(/^OWNER\s+TOTAL\s+ACCEPTING\n/m);
    expect(res.stdout).toMatch(/^\/DC=org\/CN=bob\s+1\s+1$/m);
    const json = JSON.parse((await ceadm("--json", "summary", "--by", "state")).stdout);
    expect(json.state).toEqual({ total: 2, groups: [{ key: "ACCEPTED", total: 2, states: { ACCEPTING: 2 } }] });
    expect((await ceadm("summary", "--by", "colour")).stderr).toContain("--by colour: one of vo, owner, state");
  });

  it("tells a job's story: its state history and every JEM log line naming it", async () => {
    // Control directories take only real job ids.
    const id = "0a1b2c3d-0000-4000-8000-00000000c1c1";
    const other = "0a1b2c3d-0000-4000-8000-00000000c1c2";
    const store = new JobStore(redis, prefix);
    await store.create(
      [
        JobStore.newRecord({
          id,
          owner: "/DC=org/CN=alice",
          queue: "main",
          backend: "fork",
          language: "xrsl",
          delegations: [],
          rerun: 0,
          lifetime: 60,
        }),
      ],
      100,
    );
    mkdirSync(control.jobDir(id), { recursive: true });
    writeFileSync(control.file(id, "errors"), "2025-01-01T00:00:00Z Job state change ACCEPTED -> PREPARING   Reason: admitted\n");
    const line = (o: object) => `${JSON.stringify({ level: 30, time: Date.parse("2025-01-01T00:00:01Z"), pid: 1, ...o })}\n`;
    writeFileSync(
      join(dir, "jem.log"),
      line({
        jobId: id,
        from: "INLRMS",
        to: "FINISHING",
        reason: "Job failure detected",
        failure: "Walltime exceeded",
        msg: "state change",
      }) +
        line({ jobId: other, msg: "state change", note: `not ${id}!` }) +
        `jem-1  | ${line({ count: 2, moves: { "ACCEPTED -> PREPARING": [other, id] }, msg: "state changes" })}` +
        `not json ${id}\n`,
    );
    const res = await ceadm("jobs", "log", id);
    expect(res.code).toBe(0);
    const out = res.stdout;
    expect(out).toContain("Job state change ACCEPTED -> PREPARING   Reason: admitted");
    expect(out).toMatch(
      /2025-01-01T00:00:01.000Z INFO  state change from=INLRMS to=FINISHING reason=Job failure detected failure=Walltime exceeded/,
    );
    expect(out).toMatch(/state changes count=2 moves=/);
    // Another job's line (even one whose text contains the id) and a line that is not JSON are not shown.
    expect(out.match(/INFO  state change /g)).toHaveLength(1);
    expect(out).not.toContain("note=");
    expect(out).not.toContain("not json");
    const missing = await ceadm("jobs", "log", "zz", "--log", join(dir, "nope.log"));
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain("job zz not found");
    const noLog = await ceadm("jobs", "log", other.replace("c1c2", "c1c3"), "--log", join(dir, "nope.log"));
    expect(noLog.code).toBe(1); // neither file nor record knows it
    await store.create(
      [
        JobStore.newRecord({
          id: other,
          owner: "/DC=org/CN=bob",
          queue: "main",
          backend: "fork",
          language: "xrsl",
          delegations: [],
          rerun: 0,
          lifetime: 60,
        }),
      ],
      100,
    );
    const noFiles = await ceadm("jobs", "log", other, "--log", join(dir, "nope.log"));
    expect(noFiles.stdout).toContain("unreadable: no such file (the job was cleaned, or never admitted)");
    expect(noFiles.stdout).toContain("unreadable: no such file (give --log FILE or set logging.jemLogFile)");
  });

  it("exits 2 with usage on an unknown command", async () => {
    const res = await ceadm("frobnicate");
    expect(res.code).toBe(2);
    expect(res.stderr).toContain("usage: ceadm");
  });
});
