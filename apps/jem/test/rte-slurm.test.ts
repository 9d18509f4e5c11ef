import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { enableRte, setRteParams } from "@ce/store";
import { HAS_SLURM, startSlurm, type SlurmCluster } from "../../../tests/support/slurm-cluster.js";
import { createBackend, type Backend } from "../src/lrms/index.js";
import { makeConfig, makeJob, readIf, silentLog, tempRoot, waitFor } from "../src/lrms/testdata/harness.js";

// RTEs on a REAL single-node Slurm: a node property set in stage 0 becomes an #SBATCH line Slurm
// applies, and Debian's stock ENV/PROXY runs unmodified (stage 0 on the front end, 1/2 in the job).

const HAS_ARC_RTES = existsSync("/usr/share/arc/rte/ENV/PROXY");
if (!HAS_SLURM) console.warn("rte-slurm.test.ts SKIPPED: slurm-wlm/munge not installed");

let cluster: SlurmCluster;
let root: string;
let backend: Backend;
let cfg: { paths: { controlDir: string; rteDir: string }; jobs: { runtimeEnvironments: string[]; defaultRuntimeEnvironments: string[] } };

async function untilDone(jobId: string, localId: string, jobDir: string) {
  return waitFor(async () => {
    const s = (await backend.poll([{ jobId, localId, jobDir }])).get(jobId);
    return s?.kind === "done" ? s : undefined;
  }, 45_000, 500);
}

describe.skipIf(!HAS_SLURM)("RTEs on real Slurm", () => {
  beforeAll(async () => {
    cluster = await startSlurm(`/tmp/ce-slurm-r${process.pid}`);
    process.env.SLURM_CONF = cluster.conf;
    root = tempRoot("ce-rte-slurm-");
    const config = makeConfig(root, { backend: "slurm", callsPerSecond: 50, scriptTimeoutMs: 30_000 });
    backend = createBackend(config, silentLog);
    cfg = { paths: { controlDir: config.paths.controlDir, rteDir: config.paths.rteDir }, jobs: { runtimeEnvironments: [], defaultRuntimeEnvironments: [] } };
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

  it.skipIf(!HAS_ARC_RTES)("Debian's ENV/PROXY, unmodified: proxy and CAs in the session, X509_CERT_DIR in the job", async () => {
    enableRte(cfg, "ENV/PROXY");
    const certs = join(root, "certs");
    mkdirSync(certs, { recursive: true });
    writeFileSync(join(certs, "ca.pem"), "CA\n");
    setRteParams(cfg, "ENV/PROXY", [`X509_CERT_DIR=${certs}`]);
    const proxy = join(root, "proxy.pem");
    writeFileSync(proxy, "PROXY PEM\n", { mode: 0o600 });
    const job = makeJob(root, { executable: "/bin/sh", arguments: ["-c", 'cat "$X509_CERT_DIR/ca.pem"; cat "$X509_USER_PROXY"'], stdout: "o" }, { runtimeEnvironments: ["ENV/PROXY"], credentialFile: proxy });
    const r = await backend.submit(job);
    expect(await untilDone(job.jobId, r.localId, job.jobDir)).toMatchObject({ exitCode: 0 });
    expect(readIf(join(job.sessionDir, "user.proxy"))).toBe("PROXY PEM\n");
    expect(readIf(join(job.sessionDir, "o"))).toBe("CA\nPROXY PEM\n");
    expect(existsSync(join(job.sessionDir, "arc", "certificates"))).toBe(false);
  }, 60_000);
});
