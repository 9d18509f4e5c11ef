import { execFileSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import type { ConfigInput } from "@ce/config";
import type { JobDescription } from "@ce/model";
import { createBackend } from "./index.js";
import { makeConfig, makeJob, silentLog, tempRoot } from "./testdata/harness.js";
import type { BatchJobSpec } from "./types.js";

// Golden tests of the shipped slurm/submit script: it runs for real against a fake `sbatch` that
// only records its argv (and can fail on demand); the generated <jobdir>/sbatch.sh is compared.

let root: string;
let bin: string;

beforeAll(() => {
  root = tempRoot("ce-sbatch-");
  bin = join(root, "bin");
  mkdirSync(bin);
  // Fake sbatch: mode from <jobdir>/fake-mode ("transient N" | "fatal"); prints "<n>;cluster".
  writeFileSync(
    join(bin, "sbatch"),
    `#!/bin/bash
dir=\${2%/*}
echo "$*" >> "$dir/sbatch.argv"
n=$(( $(cat "$dir/sbatch.count" 2>/dev/null || echo 0) + 1 )); echo $n > "$dir/sbatch.count"
read -r mode arg < "$dir/fake-mode" 2>/dev/null
if [[ $mode == transient && $n -le $arg ]]; then echo "sbatch: error: Socket timed out on send/recv operation" >&2; exit 1; fi
if [[ $mode == fatal ]]; then echo "sbatch: error: invalid partition specified: nope" >&2; exit 1; fi
env | grep -q '^SBATCH_PARTITION=' && { echo "SBATCH_ leaked" >&2; exit 9; }
echo "4242;ce"
`,
  );
  chmodSync(join(bin, "sbatch"), 0o755);
});

async function submit(desc: Partial<JobDescription>, opts: Partial<BatchJobSpec> = {}, cfg: ConfigInput = {}) {
  const spec = makeJob(root, desc, opts);
  const config = makeConfig(root, { backend: "slurm", slurm: { binPath: bin, extraDirectives: [] }, ...cfg.lrms }, cfg);
  const r = await createBackend(config, silentLog).submit(spec);
  const script = readFileSync(join(spec.jobDir, "sbatch.sh"), "utf8");
  const header = script.slice(0, script.indexOf("\n\n")).split("\n");
  return { spec, localId: r.localId, script, directives: header.slice(1) };
}

/** The submission tag the back end gave the job (batch.json), carried as the Slurm comment. */
const tagOf = (spec: BatchJobSpec) =>
  (JSON.parse(readFileSync(join(spec.jobDir, "batch.json"), "utf8")) as { submit: { tag: string } }).submit.tag;

const base = (spec: BatchJobSpec, partition = "main") => [
  "#SBATCH --no-requeue",
  "#SBATCH --export=NONE",
  `#SBATCH -o ${spec.jobDir}/comment`,
  `#SBATCH -e ${spec.jobDir}/comment`,
  `#SBATCH --chdir=${spec.sessionDir}`,
  `#SBATCH -p ${partition}`,
];

describe("slurm submit: sbatch script", () => {
  it("defaults: gridjob, one slot, partition = queue, nice 50; sbatch --parsable id", async () => {
    const { spec, localId, directives, script } = await submit({ executable: "/bin/true" });
    expect(localId).toBe("4242");
    expect(directives).toEqual([
      ...base(spec),
      "#SBATCH --nice=50",
      "#SBATCH -J gridjob",
      `#SBATCH --comment=${tagOf(spec)}`,
      "#SBATCH -n 1",
    ]);
    expect(script.startsWith("#!/bin/bash\n")).toBe(true);
    expect(script).toContain(`JEM_JOB_ID='${spec.jobId}'`);
    expect(readFileSync(join(spec.jobDir, "sbatch.argv"), "utf8")).toBe(`--parsable ${spec.jobDir}/sbatch.sh\n`);
  });

  it("resources: walltime rounded up to minutes, memory per cpu, count, countpernode, exclusive, priority, project", async () => {
    const { spec, directives } = await submit({
      jobName: "hello",
      wallTimeSeconds: 61,
      cpuTimeSeconds: 99_999,
      memoryMB: 2000,
      count: 8,
      countPerNode: 4,
      exclusive: true,
      priority: 80,
      projectName: "atlas.prod",
    });
    expect(directives).toEqual([
      ...base(spec),
      "#SBATCH --nice=20",
      "#SBATCH -A atlas.prod",
      "#SBATCH -J hello",
      `#SBATCH --comment=${tagOf(spec)}`,
      "#SBATCH -n 8",
      "#SBATCH --ntasks-per-node=4",
      "#SBATCH --exclusive",
      "#SBATCH -t 2",
      "#SBATCH --mem-per-cpu=2000",
    ]);
  });

  it("cputime without walltime bounds the wall time per slot; exact minutes stay", async () => {
    const a = await submit({ cpuTimeSeconds: 7200, count: 4 });
    expect(a.directives).toContain("#SBATCH -t 30");
    const b = await submit({ wallTimeSeconds: 3600 });
    expect(b.directives).toContain("#SBATCH -t 60");
    const c = await submit({ wallTimeSeconds: 1 });
    expect(c.directives).toContain("#SBATCH -t 1");
  });

  it("partition from queue config, spec override, queue defaults, extra directives, start time", async () => {
    const cfg: ConfigInput = {
      jobs: {
        queues: [
          { name: "main", allow: [] },
          { name: "long", partition: "batch_long", defaultMemoryMB: 512, defaultWallTimeSeconds: 600, allow: [] },
        ],
      },
      lrms: { slurm: { binPath: bin, extraDirectives: ["--qos=grid", "--constraint=avx2"] } },
    };
    const a = await submit({ startTime: new Date("2030-01-02T03:04:05Z") }, { queue: "long" }, cfg);
    expect(a.directives).toContain("#SBATCH -p batch_long");
    expect(a.directives).toContain("#SBATCH --mem-per-cpu=512");
    expect(a.directives).toContain("#SBATCH -t 10");
    expect(a.directives.slice(-3)).toEqual([
      `#SBATCH --begin=${execFileSync("date", ["-d", "@1893553445", "+%Y-%m-%dT%H:%M:%S"]).toString().trim()}`,
      "#SBATCH --qos=grid",
      "#SBATCH --constraint=avx2",
    ]);
    const b = await submit({}, { queue: "long", partition: "debug" }, cfg);
    expect(b.directives).toContain("#SBATCH -p debug");
  });

  it.each([
    ["my job #1", "my_job__1"],
    ["1st-job", "N1st_job"],
    ["averyveryverylongjobname", "averyveryverylo"],
    ["$(rm -rf /)", "N__rm__rf___"],
    ["a'b\"c`d`", "a_b_c_d_"],
    ["x\n#SBATCH --mem=1", "x__SBATCH___mem"],
    ["", "gridjob"],
  ])("job name %j → %s", async (name, want) => {
    const { directives } = await submit({ jobName: name });
    expect(directives.filter((d) => d.startsWith("#SBATCH -J "))).toEqual([`#SBATCH -J ${want}`]);
    expect(directives.filter((d) => d.startsWith("#SBATCH --mem"))).toEqual([]);
  });

  it("hostile arguments, environment and name survive verbatim when the script runs, nothing is executed", async () => {
    const nasty = ["$(touch pwned1)", "`touch pwned2`", "a'b", 'c"d', "line1\nline2", "; touch pwned3 #", "\\", "$HOME", "#SBATCH --mem=1"];
    const { spec, script, directives } = await submit({
      jobName: "$(touch pwned0)",
      executable: "/usr/bin/printf",
      arguments: ["%s\\0", ...nasty],
      environment: [{ name: "EVIL", value: "$(touch pwned4)'\"\n`x`" }],
      stdout: "out",
    });
    expect(directives.some((d) => /[$`'"]/.test(d))).toBe(false);
    expect(script).not.toMatch(/^[^'\n]*\$\(touch/m); // never outside single quotes
    // Run the generated batch script directly (what slurmd would do), minus Slurm.
    execFileSync("/bin/bash", [join(spec.jobDir, "sbatch.sh")], { cwd: spec.sessionDir, env: { PATH: process.env.PATH ?? "" } });
    const out = readFileSync(join(spec.sessionDir, "out"), "utf8").split("\0");
    expect(out.slice(0, nasty.length)).toEqual(nasty);
    for (let i = 0; i < 5; i++) expect(existsSync(join(spec.sessionDir, `pwned${i}`))).toBe(false);
    expect(readFileSync(join(spec.jobDir, "lrms_done"), "utf8")).toBe("0 \n");
  });

  it("retries transient sbatch errors, fails at once on others, strips SBATCH_* from the environment", async () => {
    process.env.SBATCH_PARTITION = "leak";
    process.env.JEM_SLURM_RETRY_DELAY = "0.1";
    try {
      const spec = makeJob(root, {});
      writeFileSync(join(spec.jobDir, "fake-mode"), "transient 2\n");
      const be = createBackend(makeConfig(root, { backend: "slurm", slurm: { binPath: bin, extraDirectives: [] } }), silentLog);
      expect(await be.submit(spec)).toEqual({ localId: "4242" });
      expect(readFileSync(join(spec.jobDir, "sbatch.count"), "utf8").trim()).toBe("3");

      const spec2 = makeJob(root, {});
      writeFileSync(join(spec2.jobDir, "fake-mode"), "fatal\n");
      await expect(be.submit(spec2)).rejects.toMatchObject({
        code: "SUBMIT_FAILED",
        message: expect.stringContaining("invalid partition"),
      });
      expect(readFileSync(join(spec2.jobDir, "sbatch.count"), "utf8").trim()).toBe("1");
    } finally {
      delete process.env.SBATCH_PARTITION;
      delete process.env.JEM_SLURM_RETRY_DELAY;
    }
  });

  it("bulk: one run for concurrent jobs, a per-job failure fails only that job; a recorded tag is adopted, never submitted again", async () => {
    const config = makeConfig(root, { backend: "slurm", slurm: { binPath: bin, extraDirectives: [] } });
    const be = createBackend(config, silentLog);
    const [a, b, c] = [
      makeJob(root, { executable: "/bin/true" }),
      makeJob(root, { executable: "/bin/true" }),
      makeJob(root, { executable: "/bin/true" }),
    ];
    writeFileSync(join(b.jobDir, "fake-mode"), "fatal\n");
    const r = await Promise.allSettled([a, b, c].map((s) => be.submit(s)));
    expect(r[0]).toEqual({ status: "fulfilled", value: { localId: "4242" } });
    expect(r[1]).toMatchObject({
      status: "rejected",
      reason: { code: "SUBMIT_FAILED", message: expect.stringContaining("invalid partition") },
    });
    expect(r[2]).toEqual({ status: "fulfilled", value: { localId: "4242" } });
    // Same tag again (a JEM that died before storing the id): the record answers, sbatch is not run.
    const again = { ...a, submitTag: tagOf(a), resume: false };
    expect(readFileSync(join(a.jobDir, `localid.${tagOf(a)}`), "utf8")).toBe("4242\n");
    expect(await be.submit(again)).toEqual({ localId: "4242" });
    expect(readFileSync(join(a.jobDir, "sbatch.argv"), "utf8").split("\n").filter(Boolean)).toHaveLength(1);
  });

  it("refuses paths that cannot be written as a #SBATCH directive", async () => {
    const spec = makeJob(root, {});
    const bad = { ...spec, sessionDir: `${spec.sessionDir} x` };
    mkdirSync(bad.sessionDir, { recursive: true });
    const be = createBackend(makeConfig(root, { backend: "slurm", slurm: { binPath: bin, extraDirectives: [] } }), silentLog);
    await expect(be.submit(bad)).rejects.toMatchObject({ code: "SUBMIT_FAILED", message: expect.stringContaining("session directory") });
  });
});
