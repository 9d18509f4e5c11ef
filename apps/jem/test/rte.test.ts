import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { enableRte, setRteParams } from "@ce/store";
import { createBackend, type Backend } from "../src/lrms/index.js";
import { makeConfig, makeJob, readIf, silentLog, tempRoot, waitFor } from "../src/lrms/testdata/harness.js";

// RTEs as ARC defines them, on the fork back end for real: stage 0 with joboption_* in and out,
// site parameters, and Debian's stock RTEs (nordugrid-arc-arex, /usr/share/arc/rte) unmodified.

const ARC_RTES = "/usr/share/arc/rte";
const HAS_ARC_RTES = existsSync(join(ARC_RTES, "ENV", "PROXY")) && existsSync(join(ARC_RTES, "ENV", "LRMS-SCRATCH"));
if (!HAS_ARC_RTES) console.warn("rte.test.ts: Debian ARC RTE tests SKIPPED (apt-get install nordugrid-arc-arex)");

let root: string;
let backend: Backend;
let cfg: { paths: { controlDir: string; rteDir: string }; jobs: { runtimeEnvironments: string[]; defaultRuntimeEnvironments: string[] } };

beforeAll(() => {
  root = tempRoot("ce-rte-");
  const config = makeConfig(
    root,
    { backend: "fork", callsPerSecond: 1000 },
    { jobs: { queues: [{ name: "main" }, { name: "gpu", partition: "gpus" }] } },
  );
  backend = createBackend(config, silentLog);
  cfg = {
    paths: { controlDir: config.paths.controlDir, rteDir: config.paths.rteDir },
    jobs: { runtimeEnvironments: [], defaultRuntimeEnvironments: [] },
  };
  mkdirSync(join(root, "rte", "SITE"), { recursive: true });
});

async function untilDone(jobId: string, localId: string, jobDir: string) {
  return waitFor(
    async () => {
      const s = (await backend.poll([{ jobId, localId, jobDir }])).get(jobId);
      return s?.kind === "done" ? s : undefined;
    },
    20_000,
    100,
  );
}

const batchOf = (jobDir: string) =>
  JSON.parse(readFileSync(join(jobDir, "batch.json"), "utf8")) as Record<string, unknown> & { resources: Record<string, unknown> };

describe("RTE stage 0: joboption_* in and out", () => {
  it("an RTE wraps the arguments, raises memory, adds a node property and an environment variable; the job runs as changed", async () => {
    writeFileSync(
      join(root, "rte", "SITE", "WRAP"),
      [
        'if [ "$1" = 0 ]; then',
        "  # APPTAINER-style: the payload becomes arguments of a launcher",
        '  i=0; while eval "[ -n \\"\\${joboption_arg_$i+x}\\" ]"; do i=$((i+1)); done',
        '  while [ $i -gt 0 ]; do eval "joboption_arg_$((i+1))=\\${joboption_arg_$((i-1))}"; i=$((i-1)); done',
        "  joboption_arg_0=/usr/bin/env; joboption_arg_1=WRAPPED=$2",
        "  joboption_memory=$(( ${joboption_memory:-0} + 512 ))",
        '  joboption_nodeproperty_0="--gres=gpu:1"',
        '  joboption_env_2="FROM_STAGE0=$joboption_queue"',
        '  echo "stage 0 of WRAP ran" ',
        "fi",
        "true",
      ].join("\n"),
    );
    const job = makeJob(
      root,
      {
        executable: "/bin/sh",
        arguments: ["-c", 'echo "$WRAPPED $FROM_STAGE0 $A"'],
        stdout: "out.txt",
        memoryMB: 1000,
        environment: [{ name: "A", value: "a" }],
        runtimeEnvironments: [{ name: "SITE/WRAP", options: ["yes"] }],
      },
      { runtimeEnvironments: ["SITE/WRAP"] },
    );
    const r = await backend.submit(job);
    expect(await untilDone(job.jobId, r.localId, job.jobDir)).toMatchObject({ exitCode: 0 });
    expect(readIf(join(job.sessionDir, "out.txt"))).toBe("yes main a\n");
    const batch = batchOf(job.jobDir);
    expect(batch.executable).toBe("/usr/bin/env");
    expect(batch.arguments).toEqual(["WRAPPED=yes", "/bin/sh", "-c", 'echo "$WRAPPED $FROM_STAGE0 $A"']);
    expect(batch.resources.memoryMB).toBe(1512);
    expect(batch.nodeProperties).toEqual(["--gres=gpu:1"]);
    // What stage 0 changed is reported (the JEM writes it to the job's errors) and kept in grami.
    expect(r.rteChanges).toEqual(
      expect.arrayContaining(['joboption_memory: "1000" → "1512"', 'joboption_nodeproperty_0: (unset) → "--gres=gpu:1"']),
    );
    expect(r.rteLog).toContain("stage 0 of WRAP ran");
    expect(readFileSync(join(job.jobDir, "grami"), "utf8")).toMatch(/^joboption_nodeproperty_0='--gres=gpu:1'$/m);
    expect(readFileSync(join(job.jobDir, "batch.env"), "utf8")).toContain("JOB_NODEPROPERTIES=('--gres=gpu:1')");
  });

  it("a queue change takes that queue's partition; values the CE cannot use fail the submission with a reason", async () => {
    writeFileSync(join(root, "rte", "SITE", "GPUQ"), '[ "$1" = 0 ] && joboption_queue=gpu\ntrue\n');
    const job = makeJob(root, { executable: "/bin/true" }, { runtimeEnvironments: ["SITE/GPUQ"] });
    await untilDone(job.jobId, (await backend.submit(job)).localId, job.jobDir);
    expect(batchOf(job.jobDir)).toMatchObject({ queue: "gpu", partition: "gpus" });

    writeFileSync(join(root, "rte", "SITE", "NOQ"), '[ "$1" = 0 ] && joboption_queue=nope\ntrue\n');
    await expect(backend.submit(makeJob(root, { executable: "/bin/true" }, { runtimeEnvironments: ["SITE/NOQ"] }))).rejects.toMatchObject({
      code: "SUBMIT_FAILED",
      message: expect.stringContaining('joboption_queue names no queue of this CE: "nope"'),
    });
    writeFileSync(join(root, "rte", "SITE", "BADMEM"), '[ "$1" = 0 ] && joboption_memory=lots\ntrue\n');
    await expect(
      backend.submit(makeJob(root, { executable: "/bin/true" }, { runtimeEnvironments: ["SITE/BADMEM"] })),
    ).rejects.toMatchObject({
      message: expect.stringContaining("joboption_memory must be a whole number"),
    });
    writeFileSync(join(root, "rte", "SITE", "EXIT0"), '[ "$1" = 0 ] && exit 0\ntrue\n');
    await expect(backend.submit(makeJob(root, { executable: "/bin/true" }, { runtimeEnvironments: ["SITE/EXIT0"] }))).rejects.toMatchObject(
      {
        message: expect.stringContaining("ended stage 0 early"),
      },
    );
  });

  it("stage 0 sees the job's pre-executables as joboption_pre_<n>_<i> and may add a post-executable the job then runs", async () => {
    writeFileSync(
      join(root, "rte", "SITE", "AUX"),
      [
        'if [ "$1" = 0 ]; then',
        '  echo "$joboption_pre_0_0|$joboption_pre_0_1|$joboption_pre_0_code|$joboption_arg_code" > s0.txt',
        "  joboption_post_0_0=/bin/sh; joboption_post_0_1=-c; joboption_post_0_2='echo from-rte-post > p.txt'",
        "fi",
        "true",
      ].join("\n"),
    );
    const job = makeJob(
      root,
      { executable: "/bin/true", successExitCode: 0, preExecutables: [{ path: "/bin/echo", arguments: ["hi"], successExitCode: 0 }] },
      { runtimeEnvironments: ["SITE/AUX"] },
    );
    const r = await backend.submit(job);
    expect(await untilDone(job.jobId, r.localId, job.jobDir)).toMatchObject({ exitCode: 0 });
    expect(readIf(join(job.sessionDir, "s0.txt"))).toBe("/bin/echo|hi|0|0\n");
    expect(readIf(join(job.sessionDir, "p.txt"))).toBe("from-rte-post\n");
    expect(r.rteChanges).toContain('joboption_post_0_0: (unset) → "/bin/sh"');
    expect(batchOf(job.jobDir).postExecutables).toEqual([
      { executable: "/bin/sh", arguments: ["-c", "echo from-rte-post > p.txt"], successExitCode: null },
    ]);
  });

  it("site parameters (ceadm rte params) are set before every stage; enabled links name the script", async () => {
    writeFileSync(join(root, "rte-params-src"), 'case "$1" in 0) echo "$GREETING" > s0.txt ;; 1) export SEEN="$GREETING" ;; esac\ntrue\n');
    enableRte(cfg, "SITE/PARAMS", join(root, "rte-params-src"));
    setRteParams(cfg, "SITE/PARAMS", ["GREETING=hello $(world) 'q'"]);
    const job = makeJob(
      root,
      { executable: "/bin/sh", arguments: ["-c", 'echo "$SEEN"'], stdout: "o" },
      { runtimeEnvironments: ["SITE/PARAMS"] },
    );
    await untilDone(job.jobId, (await backend.submit(job)).localId, job.jobDir);
    expect(readIf(join(job.sessionDir, "s0.txt"))).toBe("hello $(world) 'q'\n");
    expect(readIf(join(job.sessionDir, "o"))).toBe("hello $(world) 'q'\n");
  });
});

describe.skipIf(!HAS_ARC_RTES)("Debian's stock ARC RTEs, unmodified", () => {
  it("ENV/PROXY: the proxy and the CA dir (a parameter) reach the session; stage 1 points the job at them; stage 2 removes the CAs", async () => {
    enableRte(cfg, "ENV/PROXY");
    const certs = join(root, "certs");
    mkdirSync(certs, { recursive: true });
    writeFileSync(join(certs, "ca.pem"), "CA\n");
    setRteParams(cfg, "ENV/PROXY", [`X509_CERT_DIR=${certs}`]);
    const proxy = join(root, "a-proxy.pem");
    writeFileSync(proxy, "PROXY PEM\n", { mode: 0o600 });
    const job = makeJob(
      root,
      { executable: "/bin/sh", arguments: ["-c", 'cat "$X509_CERT_DIR/ca.pem"; echo "$X509_CERT_DIR"'], stdout: "o" },
      { runtimeEnvironments: ["ENV/PROXY"], credentialFile: proxy },
    );
    const r = await backend.submit(job);
    expect(await untilDone(job.jobId, r.localId, job.jobDir)).toMatchObject({ exitCode: 0 });
    expect(readIf(join(job.sessionDir, "user.proxy"))).toBe("PROXY PEM\n");
    expect(readIf(join(job.sessionDir, "o"))).toBe(`CA\n${job.sessionDir}/arc/certificates\n`);
    expect(existsSync(join(job.sessionDir, "arc", "certificates"))).toBe(false);
  });

  it("ENV/LRMS-SCRATCH: the job runs in node-local scratch named by a parameter and its files come back", async () => {
    enableRte(cfg, "ENV/LRMS-SCRATCH");
    setRteParams(cfg, "ENV/LRMS-SCRATCH", ["SCRATCH_VAR=NODE_SCRATCH"]);
    const scratch = join(root, "node-scratch");
    mkdirSync(scratch);
    const job = makeJob(
      root,
      {
        executable: "/bin/sh",
        arguments: ["-c", "pwd > where.txt; cat in.txt"],
        stdout: "o",
        environment: [{ name: "NODE_SCRATCH", value: scratch }],
      },
      { runtimeEnvironments: ["ENV/LRMS-SCRATCH"] },
    );
    writeFileSync(join(job.sessionDir, "in.txt"), "input\n");
    const r = await backend.submit(job);
    expect(r.rteChanges).toContain('RUNTIME_LOCAL_SCRATCH_DIR: "${NODE_SCRATCH}"');
    expect(await untilDone(job.jobId, r.localId, job.jobDir)).toMatchObject({ exitCode: 0 });
    expect(readIf(join(job.sessionDir, "where.txt"))).toBe(`${join(scratch, job.jobId)}\n`);
    expect(readIf(join(job.sessionDir, "o"))).toBe("input\n");
    expect(existsSync(join(scratch, job.jobId))).toBe(false);
  });
});
