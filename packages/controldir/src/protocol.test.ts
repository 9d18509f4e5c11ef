import { randomUUID } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { emptyDescription, type JobDescription } from "@ce/model";
import { JobStore, type JobRecord } from "@ce/store";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { ControlDir, parseKeyValues } from "./controldir.js";
import { completeUpload, createJobs, type NewJob } from "./protocol.js";
import { appendInputs, forgetInputs, InputStatusPathError, parseInputStatus, readInputStatus } from "./inputstatus.js";
import { renderFileList } from "./jobfiles.js";

let redis: Redis;
let jobs: JobStore;
let control: ControlDir;
let root: string;
const prefix = `{ctl-test-${process.pid}}`;

beforeAll(async () => {
  redis = new Redis(inject("redisUrl"));
  jobs = new JobStore(redis, prefix);
  root = await mkdtemp(join(tmpdir(), "ctl-test-"));
  control = new ControlDir(join(root, "control"), join(root, "session"));
  await control.ensureRoots();
});
afterAll(async () => {
  const found = await redis.keys(`${prefix}*`);
  if (found.length) await redis.del(...found);
  redis.disconnect();
  await rm(root, { recursive: true, force: true });
});

function newJob(d: Partial<JobDescription> = {}, owner = "/CN=ctl"): NewJob {
  const description: JobDescription = { ...emptyDescription("emies:adl"), executable: "/bin/true", ...d };
  const record = JobStore.newRecord({
    id: randomUUID(),
    owner,
    queue: "main",
    backend: "fork",
    language: description.language,
    rerun: 0,
    lifetime: 60,
    delegations: [],
  });
  return {
    record,
    files: {
      id: record.id,
      description,
      source: "<adl/>",
      owner: record.owner,
      queue: "main",
      backend: "fork",
      endpointUrl: "https://ce.test",
      hostname: "ce.test",
      version: "1.1",
      lifetime: 60,
      rerun: 0,
      requestId: "r1",
      now: new Date(),
    },
  };
}

describe("createJobs: mark → files → commit → notify", () => {
  it("writes the control files (no status: the JEM's, from the first move), commits the record and notifies once", async () => {
    const j = newJob({ inputFiles: [{ name: "in 1.txt", executable: false, options: {}, source: "https://x/in" }] });
    const notified: JobRecord[][] = [];
    let markedDuringNotify = false;
    const r = await createJobs({ control, jobs }, [j], {
      maxTotal: 100,
      notify: async (c) => {
        notified.push(c);
        markedDuringNotify = (await redis.zscore(jobs.keys.creating(), j.record.id)) !== null;
      },
    });
    expect(r.outcomes).toEqual(["created"]);
    expect(notified.map((c) => c.map((x) => x.id))).toEqual([[j.record.id]]);
    // The mark covers files without a record: the commit that creates the record clears it.
    expect(markedDuringNotify).toBe(false);
    expect(await redis.zscore(jobs.keys.creating(), j.record.id)).toBeNull();
    expect((await jobs.get(j.record.id))?.state).toBe("ACCEPTED");
    const id = j.record.id;
    expect(await control.read(id, "status")).toBeUndefined();
    expect(await control.read(id, "input")).toBeUndefined(); // rendered from spec on demand
    expect(renderFileList("input", await control.read(id, "spec"))).toBe("/in\\ 1.txt https://x/in\n");
    expect(await control.read(id, "input_status")).toBeUndefined(); // appears with its first line
    expect(parseKeyValues((await control.read(id, "local"))!).globalid).toBe(id);
    for (const f of ["description", "spec", "local"] as const) {
      expect((await stat(control.file(id, f))).mode & 0o777).toBe(0o600);
    }
  });

  it("never overwrites an existing control file (wx): that job fails, its files are removed, the others are created", async () => {
    const [a, b] = [newJob(), newJob()];
    await control.createJobDirs(b.record.id);
    await writeFile(control.file(b.record.id, "spec"), "planted");
    const warned: string[] = [];
    const r = await createJobs({ control, jobs }, [a, b], {
      maxTotal: 100,
      minRequired: 1,
      warn: (what, _e, id) => warned.push(`${id}:${what}`),
    });
    expect(r.outcomes).toEqual(["created", "files-failed"]);
    expect(warned).toEqual([`${b.record.id}:writing control files failed`]);
    expect(existsSync(control.jobDir(b.record.id))).toBe(false);
    expect(await jobs.get(b.record.id)).toBeUndefined();
  });

  it("jobs over the limit are not committed and leave no files", async () => {
    const many = [newJob(), newJob(), newJob()];
    const held = 1_000_000 - (await jobs.headroom(1_000_000));
    const r = await createJobs({ control, jobs }, many, { maxTotal: held + 1, minRequired: 1 });
    expect(r.outcomes).toEqual(["created", "limited", "limited"]);
    expect(r.limitedBy).toBe("total");
    for (const j of many.slice(1)) expect(existsSync(control.jobDir(j.record.id))).toBe(false);
  });
});

describe("createJobs: admission at creation (@ce/model CREATION_STATES)", () => {
  const upload = { inputFiles: [{ name: "in.dat", executable: false, options: {} }] };
  const admit = (maxActivePerOwner: number) => ({ maxActivePerOwner, uploadTimeoutMs: 600_000 });

  it("a job that only waits for uploads is created in PREPARING, due at its upload deadline, with its errors line; others stay ACCEPTED, due now", async () => {
    const owner = `/CN=adm-${randomUUID()}`;
    const [waits, remote, dry, none, later] = [
      newJob(upload, owner),
      newJob({ inputFiles: [{ name: "r", executable: false, options: {}, source: "https://x/r" }, ...upload.inputFiles] }, owner),
      newJob({ ...upload, dryRun: true }, owner),
      newJob({}, owner),
      newJob({ ...upload, startTime: new Date(Date.now() + 3_600_000) }, owner),
    ];
    const t0 = Date.now();
    const r = await createJobs({ control, jobs }, [waits, remote, dry, none, later], { maxTotal: 1_000_000, admit: admit(100) });
    expect(r.outcomes.every((o) => o === "created")).toBe(true);
    expect(r.committed.map((c) => c.rest)).toEqual(["PREPARING", "ACCEPTING", "ACCEPTING", "ACCEPTING", "ACCEPTING"]);
    const rec = (await jobs.get(waits.record.id))!;
    expect([rec.state, rec.rest, rec.stateSince === rec.created]).toEqual(["PREPARING", "PREPARING", true]);
    expect(await control.read(waits.record.id, "status")).toBeUndefined();
    expect(await control.read(waits.record.id, "errors")).toMatch(
      /^\S+Z Job state change ACCEPTED -> PREPARING {3}Reason: Starting job processing\n\S+Z Waiting for client uploads: in\.dat\n$/,
    );
    expect(await redis.smembers(jobs.keys.ownerRest(rec.ownerKey, "PREPARING"))).toEqual([waits.record.id]);
    const due = Number(await redis.zscore(jobs.keys.advanceDue(), waits.record.id));
    expect(due).toBeGreaterThanOrEqual(t0 + 600_000);
    for (const j of [remote, dry, none, later]) {
      expect((await jobs.get(j.record.id))?.state).toBe("ACCEPTED");
      expect(await control.read(j.record.id, "status")).toBeUndefined();
      expect(await control.read(j.record.id, "errors")).toBeUndefined();
      expect(Number(await redis.zscore(jobs.keys.advanceDue(), j.record.id))).toBeLessThanOrEqual(Date.now());
    }
  });

  it("an owner at maxActivePerOwner gets ACCEPTED jobs (files rewritten before the commit), for the JEM to admit", async () => {
    const owner = `/CN=adm-${randomUUID()}`;
    const first = await createJobs({ control, jobs }, [newJob(upload, owner), newJob(upload, owner)], {
      maxTotal: 1_000_000,
      admit: admit(3),
    });
    expect(first.committed.map((c) => c.state)).toEqual(["PREPARING", "PREPARING"]);
    // Two active, limit 3: two more would pass it, so neither is admitted (all or none per call).
    const more = [newJob(upload, owner), newJob(upload, owner)];
    const r = await createJobs({ control, jobs }, more, { maxTotal: 1_000_000, admit: admit(3) });
    expect(r.outcomes).toEqual(["created", "created"]);
    expect(r.limitedBy).toBeUndefined();
    for (const j of more) {
      expect((await jobs.get(j.record.id))?.rest).toBe("ACCEPTING");
      expect(await control.read(j.record.id, "status")).toBeUndefined();
      expect(await control.read(j.record.id, "errors")).toBeUndefined();
    }
    const one = await createJobs({ control, jobs }, [newJob(upload, owner)], { maxTotal: 1_000_000, admit: admit(3) });
    expect(one.committed[0]?.state).toBe("PREPARING");
  });

  it("admits only the first owner's jobs of a call; without `admit` every job is ACCEPTED", async () => {
    const [a, b] = [newJob(upload, `/CN=adm-${randomUUID()}`), newJob(upload, `/CN=adm-${randomUUID()}`)];
    const r = await createJobs({ control, jobs }, [a, b], { maxTotal: 1_000_000, admit: admit(100) });
    expect(r.committed.map((c) => c.state)).toEqual(["PREPARING", "ACCEPTED"]);
    const c = await createJobs({ control, jobs }, [newJob(upload)], { maxTotal: 1_000_000 });
    expect(c.committed[0]?.state).toBe("ACCEPTED");
  });
});

describe("input_status is append-only", () => {
  it("refuses a whole-file rewrite and paths that are not one line", async () => {
    const j = newJob();
    await createJobs({ control, jobs }, [j], { maxTotal: 1_000_000 });
    await expect(control.write(j.record.id, "input_status", "/x\n")).rejects.toThrow(/append-only/);
    for (const bad of ["", "/", "a\nb", "a\r", " a"])
      await expect(appendInputs(control, j.record.id, [bad])).rejects.toBeInstanceOf(InputStatusPathError);
  });

  it("later lines win: a forgotten input is wanted again until it is recorded again", () => {
    expect(parseInputStatus("\n/a\n/b\n-/a\n/\n")).toEqual({ paths: new Set(["b"]), complete: true });
    expect(parseInputStatus("/a\n-/a\n/a\n").paths).toEqual(new Set(["a"]));
  });

  it("upload only tells a job that waits for its inputs", async () => {
    const j = newJob();
    await createJobs({ control, jobs }, [j], { maxTotal: 1_000_000 });
    let told = 0;
    expect(await completeUpload(control, { id: j.record.id, state: "INLRMS" }, "/late", async () => told++)).toBe(false);
    expect(await completeUpload(control, { id: j.record.id, state: "PREPARING" }, "/in.txt", async () => told++)).toBe(true);
    expect(told).toBe(1);
    expect([...(await readInputStatus(control, j.record.id)).paths]).toEqual(["in.txt"]);
  });

  it("upload records appended while the JEM restarts the job (forgetting downloads) are never lost", async () => {
    const j = newJob();
    const id = j.record.id;
    await createJobs({ control, jobs }, [j], { maxTotal: 1_000_000 });
    await appendInputs(control, id, ["dl/a", "dl/b"]);
    // Gateways appending 400 upload records while restarts run again and again (libuv runs the
    // appends on several threads at once, so they truly interleave with the restarts' writes).
    const uploads = Array.from({ length: 400 }, (_, i) => `up/${i}`);
    const restarts = Array.from({ length: 50 }, async (_, k) => {
      await forgetInputs(control, id, ["dl/a", "dl/b"]);
      if (k % 2) await appendInputs(control, id, ["dl/a"]); // the re-download of a restart
    });
    await Promise.all([
      ...uploads.map((u) => completeUpload(control, { id, state: "ACCEPTED" }, `/${u}`, async () => undefined)),
      ...restarts,
    ]);
    const { paths } = await readInputStatus(control, id);
    for (const u of uploads) expect(paths.has(u), u).toBe(true);
    expect(paths.has("dl/b")).toBe(false);
    // Every line whole: nothing interleaved inside a line.
    const lines = (await readFile(control.file(id, "input_status"), "utf8")).split("\n").filter(Boolean);
    expect(lines.every((l) => /^-?\/(up\/\d+|dl\/[ab])$/.test(l))).toBe(true);
    expect(lines.filter((l) => l.startsWith("/up/")).length).toBe(400);
  });
});
