import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { enableRte, setRteParams } from "@ce/store";
import { HAS_CONTAINER_TOOLS, testImage } from "@ce/testing/container-image";
import { HAS_SLURM, startSlurm, type SlurmCluster } from "@ce/testing/slurm";
import { createBackend, type Backend } from "../src/lrms/index.js";
import { makeConfig, makeJob, readIf, silentLog, tempRoot, waitFor } from "../src/lrms/testdata/harness.js";

// Site integration on a REAL single-node Slurm: a node property set in RTE stage 0 becomes an
// #SBATCH line Slurm applies; Debian's stock ENV/PROXY runs unmodified (stage 0 on the front end,
// 1/2 in the job); placement rules put a VO's jobs under its account, QOS and partition; GPU
// requests become gres on a node with two (count-only) GPUs.

const HAS_ARC_RTES = existsSync("/usr/share/arc/rte/ENV/PROXY");
if (!HAS_SLURM) console.warn("site-slurm.test.ts SKIPPED: slurm-wlm/munge not installed");

let cluster: SlurmCluster;
let root: string;
let backend: Backend;
let placed: Backend;
let cfg: { paths: { controlDir: string; rteDir: string }; jobs: { runtimeEnvironments: string[]; defaultRuntimeEnvironments: string[] } };

async function untilDone(jobId: string, localId: string, jobDir: string) {
  return waitFor(
    async () => {
      const s = (await backend.poll([{ jobId, localId, jobDir }])).get(jobId);
      return s?.kind === "done" ? s : undefined;
    },
    45_000,
    500,
  );
}

describe.skipIf(!HAS_SLURM)("RTEs and placement on real Slurm", () => {
  beforeAll(async () => {
    cluster = await startSlurm(`/tmp/ce-slurm-r${process.pid}`, { gpus: 2 });
    process.env.SLURM_CONF = cluster.conf;
    root = tempRoot("ce-rte-slurm-");
    const config = makeConfig(root, { backend: "slurm", callsPerSecond: 50, scriptTimeoutMs: 30_000 });
    backend = createBackend(config, silentLog);
    placed = createBackend(
      makeConfig(root, {
        backend: "slurm",
        callsPerSecond: 50,
        scriptTimeoutMs: 30_000,
        slurm: {
          placement: [
            {
              match: ["vo:atlas", "fqan:/atlas/Role=production"],
              account: "atlasprod",
              qos: "normal",
              partition: "debug",
              directives: ["--time-min=1"],
            },
            { match: ["vo:atlas"], account: "atlas" },
            { match: ["dn:/DC=test/CN=local *"], partition: "debug" },
          ],
        },
      }),
      silentLog,
    );
    cfg = {
      paths: { controlDir: config.paths.controlDir, rteDir: config.paths.rteDir },
      jobs: { runtimeEnvironments: [], defaultRuntimeEnvironments: [] },
    };
  }, 90_000);

  afterAll(() => cluster?.stop(), 60_000);

  it("joboption_nodeproperty_0 from stage 0 is a #SBATCH line of the job, and Slurm applies it", async () => {
    mkdirSync(join(root, "rte", "SITE"), { recursive: true });
    writeFileSync(join(root, "rte", "SITE", "PROP"), '[ "$1" = 0 ] && joboption_nodeproperty_0="--job-name=rte_prop"\ntrue\n');
    const job = makeJob(root, { jobName: "plain", executable: "/bin/true" }, { runtimeEnvironments: ["SITE/PROP"] });
    const r = await backend.submit(job);
    expect(readFileSync(join(job.jobDir, "sbatch.sh"), "utf8")).toMatch(/^#SBATCH --job-name=rte_prop$/m);
    const shown = execFileSync("scontrol", ["-o", "show", "job", r.localId], { encoding: "utf8" });
    expect(shown).toMatch(/JobName=rte_prop /);
    expect(await untilDone(job.jobId, r.localId, job.jobDir)).toMatchObject({ exitCode: 0 });
  }, 60_000);

  it.skipIf(!HAS_ARC_RTES)(
    "Debian's ENV/PROXY, unmodified: proxy and CAs in the session, X509_CERT_DIR in the job",
    async () => {
      enableRte(cfg, "ENV/PROXY");
      const certs = join(root, "certs");
      mkdirSync(certs, { recursive: true });
      writeFileSync(join(certs, "ca.pem"), "CA\n");
      setRteParams(cfg, "ENV/PROXY", [`X509_CERT_DIR=${certs}`]);
      const proxy = join(root, "proxy.pem");
      writeFileSync(proxy, "PROXY PEM\n", { mode: 0o600 });
      const job = makeJob(
        root,
        { executable: "/bin/sh", arguments: ["-c", 'cat "$X509_CERT_DIR/ca.pem"; cat "$X509_USER_PROXY"'], stdout: "o" },
        { runtimeEnvironments: ["ENV/PROXY"], credentialFile: proxy },
      );
      const r = await backend.submit(job);
      expect(await untilDone(job.jobId, r.localId, job.jobDir)).toMatchObject({ exitCode: 0 });
      expect(readIf(join(job.sessionDir, "user.proxy"))).toBe("PROXY PEM\n");
      expect(readIf(join(job.sessionDir, "o"))).toBe("CA\nPROXY PEM\n");
      expect(existsSync(join(job.sessionDir, "arc", "certificates"))).toBe(false);
    },
    60_000,
  );

  it("placement rules: a VO's production role, the VO, a DN; the rest unplaced", async () => {
    const show = (id: string) => execFileSync("scontrol", ["-o", "show", "job", id], { encoding: "utf8" });
    const submit = async (owner: string, fqans?: string[]) => {
      const job = makeJob(root, { executable: "/bin/true", projectName: "userproject" }, { owner, ...(fqans ? { fqans } : {}) });
      const r = await placed.submit(job);
      return { job, shown: show(r.localId), script: readFileSync(join(job.jobDir, "sbatch.sh"), "utf8") };
    };
    const prod = await submit("/DC=test/CN=prod", ["/atlas/Role=production", "/atlas"]);
    expect(prod.shown).toMatch(/ Account=atlasprod /);
    // Without slurmdbd (the test cluster has no accounting storage) Slurm keeps no QOS: the script says it.
    expect(prod.script).toMatch(/^#SBATCH --qos=normal$/m);
    expect(prod.shown).toMatch(/ Partition=debug /);
    expect(prod.shown).toMatch(/ TimeMin=00:01:00 /);
    expect(prod.script).toMatch(/^#SBATCH -A atlasprod$/m);

    const user = await submit("https://iam.example/abc", ["/atlas", "/atlas/higgs"]);
    expect(user.shown).toMatch(/ Account=atlas /);
    expect(user.shown).toMatch(/ Partition=main /);

    const local = await submit("/DC=test/CN=local user");
    expect(local.shown).toMatch(/ Partition=debug /);
    expect(local.shown).toMatch(/ Account=userproject /);

    const other = await submit("/DC=test/CN=someone", ["/cms"]);
    expect(other.shown).toMatch(/ Partition=main /);
    expect(other.shown).toMatch(/ Account=userproject /);
    expect(JSON.parse(readFileSync(join(other.job.jobDir, "batch.json"), "utf8")).slurm).toEqual({
      extraDirectives: [],
      account: null,
      qos: null,
      placementRule: null,
    });
  }, 60_000);

  it("GPU jobs ask for --gres=gpu:N: two run on the node's two GPUs, the third waits for one", async () => {
    const jobs = [1, 2, 3].map(() => makeJob(root, { executable: "/bin/sleep", arguments: ["30"], gpus: 1 }));
    const ids: string[] = [];
    for (const j of jobs) ids.push((await backend.submit(j)).localId);
    try {
      expect(readFileSync(join(jobs[0]!.jobDir, "sbatch.sh"), "utf8")).toMatch(/^#SBATCH --gres=gpu:1$/m);
      const states = await waitFor(
        () => {
          const out = execFileSync("squeue", ["-h", "-o", "%i %T %r", "-j", ids.join(",")], { encoding: "utf8" });
          const rows = out
            .trim()
            .split("\n")
            .map((l) => l.split(" "));
          const running = rows.filter((r) => r[1] === "RUNNING").length;
          // A job just queued shows reason "None" until the scheduler has looked at it.
          const waiting = rows.find((r) => r[1] === "PENDING");
          return running === 2 && rows.length === 3 && waiting?.[2] !== "None" ? rows : undefined;
        },
        30_000,
        500,
      );
      const waiting = states.find((r) => r[1] === "PENDING");
      expect(waiting?.[2]).toMatch(/Resources|Priority/);
    } finally {
      execFileSync("scancel", ids);
    }
  }, 60_000);

  it.skipIf(!HAS_CONTAINER_TOOLS)(
    "ENV/CONTAINER: the payload runs in its image on the node; a node without the image fails the job in stage 1 with the reason",
    async () => {
      const image = await testImage();
      enableRte(cfg, "ENV/CONTAINER");
      setRteParams(cfg, "ENV/CONTAINER", [`CONTAINER_IMAGES=${image.images}`, "CONTAINER_CHECK_FRONTEND=no"]);
      const rte = (name: string) => ({ runtimeEnvironments: [{ name: "ENV/CONTAINER", options: [name] }] });
      const ok = makeJob(
        root,
        { executable: "/bin/cat", arguments: ["/etc/ce-test-image"], stdout: "o", ...rte(image.name) },
        { runtimeEnvironments: ["ENV/CONTAINER"] },
      );
      // Front-end checks off: stage 0 takes the name; the node finds no such image.
      const gone = makeJob(root, { executable: "/bin/true", ...rte("not-on-the-node") }, { runtimeEnvironments: ["ENV/CONTAINER"] });
      const [a, b] = [await backend.submit(ok), await backend.submit(gone)];
      expect(await untilDone(ok.jobId, a.localId, ok.jobDir)).toMatchObject({ exitCode: 0 });
      expect(readIf(join(ok.sessionDir, "o"))).toBe(image.marker);
      expect(await untilDone(gone.jobId, b.localId, gone.jobDir)).toMatchObject({
        exitCode: 1,
        message: "Runtime environment ENV/CONTAINER failed in stage 1",
      });
      expect(readIf(join(gone.jobDir, "comment"))).toMatch(/ENV\/CONTAINER: image "not-on-the-node" not found on /);
    },
    90_000,
  );
});
