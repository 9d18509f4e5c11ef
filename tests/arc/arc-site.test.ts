/**
 * Site integration seen through the REAL ARC client (fork back end).
 *
 * State hooks: a site admission hook at ACCEPTED
 * refuses one user's jobs with a reason that `arcstat -l` prints, passes another user's, and a
 * hook that hangs (ended at its timeout) or crashes (killed by a signal) neither refuses the job
 * (`onError: pass`, the default) nor holds up another user's jobs: hooks run outside the JEM's
 * slots, at most `concurrency` at once, and one owner never holds all of them.
 * docs/state-hooks.md.
 *
 * ADL PreExecutable: arcsub passes it on; a failing one fails the job with its name and code in
 * `arcstat -l`. docs/adl.md.
 *
 * GPUs: a queue's maxGpusPerJob refuses a bigger request at submission (per-item 403 whose reason
 * arcsub prints) and is published in GLUE2, which arcinfo still reads. docs/gpus.md.
 */
import { X509Certificate, createPrivateKey } from "node:crypto";
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { createProxy, credential, issueUserCert } from "@ce/x509/testing";
import { startStack, type Stack } from "@ce/testing/stack";
import { arc, HAS_ARC, ok, parseArcstat, restCall, submittedJobs, waitFor } from "./arc-tools.js";

const REFUSED_DN = "/DC=org/DC=ce-dev/O=Users/CN=Over Quota";
const REASON = "Over Quota has used this month's CPU allocation; ask support@example.org";
const HOOK_TIMEOUT_S = 6;

// argv: job id, state; CE_JOB_* in the environment. No shell features beyond POSIX sh.
const ADMIT_SH = `#!/bin/sh
[ "$2" = ACCEPTED ] || { echo "called for $2"; exit 3; }
case "$CE_JOB_QUEUE" in
  hang) exec sleep 30 ;;
  crash) kill -KILL $$ ;;
esac
case "$CE_JOB_OWNER" in
  *"/CN=Over Quota") echo "${REASON}"; echo "quota table row 17" >&2; exit 1 ;;
esac
exit 0
`;

const job = (name: string, queue = "main") =>
  `&(executable="/bin/sh")(arguments="-c" "echo ${name} ran")(jobname="${name}")(queue="${queue}")(stdout="out.txt")`;

describe.skipIf(!HAS_ARC)("site hooks and GPU limits through the ARC client (fork back end)", () => {
  let stack: Stack;
  let hookDir: string;
  let work: string;
  let otherProxy = "";

  beforeAll(async () => {
    // The hook runs as `nobody`: its script lives outside the (private) state directory.
    hookDir = mkdtempSync(join(tmpdir(), "ce-arc-hooks-"));
    chmodSync(hookDir, 0o755);
    writeFileSync(join(hookDir, "admit.sh"), ADMIT_SH, { mode: 0o755 });
    stack = await startStack({
      redisUrl: inject("redisUrl"),
      redisUsers: inject("redisUsers"),
      config: {
        jobs: {
          queues: [{ name: "main", maxGpusPerJob: 0 }, { name: "hang" }, { name: "crash" }, { name: "gpu", maxGpusPerJob: 2 }],
          hooks: {
            account: "nobody",
            concurrency: 2,
            timeoutSeconds: HOOK_TIMEOUT_S,
            scripts: [{ state: "ACCEPTED", command: [join(hookDir, "admit.sh")] }],
          },
        },
      },
      // A second user of the same CA, whose jobs the hook refuses.
      prepare: (state) => {
        const pki = join(state, "pki");
        const ca = credential(
          new X509Certificate(readFileSync(join(pki, "ca", "ca.pem"))),
          createPrivateKey(readFileSync(join(pki, "ca-private", "ca.key"))),
        );
        const user = issueUserCert(ca, { dn: REFUSED_DN });
        mkdirSync(join(state, "other"), { recursive: true });
        otherProxy = join(state, "other", "proxy.pem");
        writeFileSync(otherProxy, createProxy(user.certPem, user.keyPem, { lifetimeSeconds: 3600 }).filePem, { mode: 0o600 });
      },
    });
    work = join(stack.state, "work");
    mkdirSync(work, { recursive: true });
    for (const [f, text] of Object.entries({
      "ok.xrsl": job("hook-ok"),
      "hang.xrsl": job("hook-hang", "hang"),
      "crash.xrsl": job("hook-crash", "crash"),
      "refused.xrsl": job("hook-refused"),
    })) {
      writeFileSync(join(work, f), text);
    }
  }, 120_000);
  afterAll(async () => {
    await stack?.stop();
    if (hookDir) rmSync(hookDir, { recursive: true, force: true });
  }, 60_000);

  const run = (proxy: string, tool: string, args: string[]) =>
    arc(tool, args, { env: { ...stack.arcEnv, X509_USER_PROXY: proxy }, cwd: work, timeoutMs: 60_000 });
  const stat = async (proxy: string, jobsDat: string) => {
    const r = await run(proxy, "arcstat", ["-j", jobsDat, "-a", "-l"]);
    return { out: r.stdout, jobs: parseArcstat(r.stdout) };
  };
  const id = (url: string | undefined) => url!.replace(/.*\//, "");

  it(
    "refuses the over-quota user's job with the hook's reason in arcstat -l; hanging and crashing hooks hold up no other user's job",
    { timeout: 60_000 },
    async () => {
      const mine = stack.arcEnv.X509_USER_PROXY!;
      const myJobs = join(stack.state, "home", "mine.dat");
      const theirJobs = join(stack.state, "home", "theirs.dat");
      const sub = async (proxy: string, jobsDat: string, files: string[]) =>
        submittedJobs(
          ok(await run(proxy, "arcsub", ["-j", jobsDat, "-C", stack.url, "-T", "arcrest", ...files]), `arcsub ${files.join(" ")}`).stdout,
        );
      const [refusedUrl] = await sub(otherProxy, theirJobs, ["refused.xrsl"]);
      // Two jobs whose hooks hang: with 2 hook slots, on a FIFO of slots they would hold both.
      // The hooks may start while arcsub is still running: the earliest they can time out is counted from here.
      const hangSubmitted = Date.now();
      const hangUrls = await sub(otherProxy, theirJobs, ["hang.xrsl", "hang.xrsl"]);
      const [okUrl, crashUrl] = await sub(mine, myJobs, ["ok.xrsl", "crash.xrsl"]);
      expect([refusedUrl, ...hangUrls, okUrl, crashUrl].filter(Boolean)).toHaveLength(5);

      // The refused job: Failed, and the hook's first stdout line is what the user reads.
      const refused = await waitFor(
        "refused job failed",
        async () => {
          const s = await stat(otherProxy, theirJobs);
          return s.jobs.get(id(refusedUrl))?.state === "Failed" ? s.out : undefined;
        },
        30_000,
      );
      expect(refused).toMatch(new RegExp(`^ Job Error: Job refused by the site at ACCEPTED: ${REASON.replace(/[.?]/g, "\\$&")}$`, "m"));
      expect(refused).not.toContain("quota table row"); // stderr is for the site's logs

      // The other user's ordinary job and the crashing hook's job run to the end while the hanging
      // hooks are still within their timeout: those jobs have not left ACCEPTED yet.
      let whileHanging: (string | undefined)[] = [];
      await waitFor(
        "ok and crash jobs finished",
        async () => {
          const s = await stat(mine, myJobs);
          const done = [okUrl, crashUrl].every((u) => s.jobs.get(id(u))?.state === "Finished");
          if (done) {
            const theirs = (await stat(otherProxy, theirJobs)).jobs;
            whileHanging = hangUrls.map((u) => theirs.get(id(u))?.state);
          }
          return done ? true : undefined;
        },
        30_000,
      );
      // They did not wait for a hanging hook's timeout: both hanging jobs were still in ACCEPTED.
      expect(whileHanging).toEqual(["Accepted", "Accepted"]); // ARC's name for ACCEPTING/ACCEPTED

      // Each hanging hook is ended at its timeout (one after the other: one owner holds one of the
      // two slots) and, with onError: pass, its job goes on.
      await waitFor(
        "hang jobs finished",
        async () => {
          const s = await stat(otherProxy, theirJobs);
          return hangUrls.every((u) => s.jobs.get(id(u))?.state === "Finished") ? true : undefined;
        },
        40_000,
      );
      expect(Date.now() - hangSubmitted).toBeGreaterThanOrEqual(2 * HOOK_TIMEOUT_S * 1000);
      const logs = stack.logs();
      for (const u of hangUrls) expect(logs).toMatch(new RegExp(`"jobId":"${id(u)}".*timed out after ${HOOK_TIMEOUT_S} s`));
      expect(logs).toMatch(new RegExp(`"jobId":"${id(crashUrl)}".*signal SIGKILL`));
    },
  );

  it(
    "ADL PreExecutable through arcsub: a failing one fails the job, and arcstat -l names it and its code",
    { timeout: 60_000 },
    async () => {
      const mine = stack.arcEnv.X509_USER_PROXY!;
      const jobsDat = join(stack.state, "home", "prepost.dat");
      writeFileSync(
        join(work, "pre.adl"),
        `<?xml version="1.0" encoding="UTF-8"?>
<ActivityDescription xmlns="http://www.eu-emi.eu/es/2010/12/adl">
  <ActivityIdentification><Name>pre-fails</Name></ActivityIdentification>
  <Application>
    <Executable><Path>/bin/true</Path></Executable>
    <PreExecutable><Path>/bin/sh</Path><Argument>-c</Argument><Argument>exit 3</Argument><FailIfExitCodeNotEqualTo>0</FailIfExitCodeNotEqualTo></PreExecutable>
  </Application>
  <Resources><QueueName>main</QueueName></Resources>
</ActivityDescription>`,
      );
      const [url] = submittedJobs(
        ok(await run(mine, "arcsub", ["-j", jobsDat, "-C", stack.url, "-T", "arcrest", "pre.adl"]), "arcsub pre.adl").stdout,
      );
      const out = await waitFor(
        "pre-executable job failed",
        async () => {
          const s = await stat(mine, jobsDat);
          return s.jobs.get(id(url))?.state === "Failed" ? s.out : undefined;
        },
        30_000,
      );
      expect(out).toMatch(/^ Job Error: LRMS error: \(3\) Pre-executable 1 \(\/bin\/sh\) exited with code 3, expected 0$/m);
    },
  );

  // arcsub re-writes every description as ADL before sending it (and drops xRSL's `gpus`, an
  // attribute it does not know): through it, a GPU request is ADL's <Coprocessor>, one GPU.
  it(
    "GPU limit: arcsub of an ADL Coprocessor job is refused by the queue without GPUs with the reason, taken by the GPU queue; arcinfo reads the published limit",
    { timeout: 60_000 },
    async () => {
      const mine = stack.arcEnv.X509_USER_PROXY!;
      const gpuJobs = join(stack.state, "home", "gpu.dat");
      const adl = (queue: string) => `<?xml version="1.0" encoding="UTF-8"?>
<ActivityDescription xmlns="http://www.eu-emi.eu/es/2010/12/adl">
  <ActivityIdentification><Name>gpu-${queue}</Name></ActivityIdentification>
  <Application><Executable><Path>/bin/true</Path></Executable></Application>
  <Resources><QueueName>${queue}</QueueName><Coprocessor>CUDA</Coprocessor></Resources>
</ActivityDescription>`;
      writeFileSync(join(work, "gpu-main.adl"), adl("main"));
      writeFileSync(join(work, "gpu-gpu.adl"), adl("gpu"));
      // arcsub prints the server's per-item reason at INFO level ("Failed to submit all jobs: <code> <reason>").
      const refused = await run(mine, "arcsub", ["-d", "INFO", "-j", gpuJobs, "-C", stack.url, "-T", "arcrest", "gpu-main.adl"]);
      expect(refused.code, refused.stdout + refused.stderr).not.toBe(0);
      expect(submittedJobs(refused.stdout)).toEqual([]);
      expect(refused.stdout + refused.stderr).toContain("403 Requested 1 GPU(s); queue main has no GPUs (maxGpusPerJob 0)");
      const taken = ok(
        await run(mine, "arcsub", ["-j", gpuJobs, "-C", stack.url, "-T", "arcrest", "gpu-gpu.adl"]),
        "arcsub to the GPU queue",
      );
      expect(submittedJobs(taken.stdout)).toHaveLength(1);

      // More than the GPU queue's limit, as an xRSL client that sends its text unchanged (pyarcrest) asks.
      const direct = await restCall({
        url: `${stack.url}/rest/1.0/jobs?action=new`,
        method: "POST",
        body: `&(executable="/bin/true")(queue="gpu")(gpus=3)`,
        headers: { "content-type": "application/rsl" },
        proxyFile: mine,
        caFile: join(stack.pki, "ca", "ca.pem"),
      });
      expect(JSON.parse(direct.body).job).toEqual([
        { "status-code": "403", reason: "Requested 3 GPU(s); queue gpu allows at most 2 per job (maxGpusPerJob)" },
      ]);

      // The GLUE 2.1 accelerator element does not upset the ARC client's GLUE2 reader; the XML has it.
      const info = ok(await run(mine, "arcinfo", ["-c", stack.url, "-l"]), "arcinfo -l");
      expect(info.stdout).toMatch(/4 Shares/);
      expect(info.stdout).toMatch(/Name: gpu\n\s+Mapping queue: gpu/);
      const xml = await restCall({
        url: `${stack.url}/rest/1.0/info`,
        proxyFile: mine,
        caFile: join(stack.pki, "ca", "ca.pem"),
        headers: { accept: "text/xml" },
      });
      expect(xml.body).toMatch(
        /<ComputingShareAcceleratorInfo [^>]*><ID>urn:ogf:ComputingShareAcceleratorInfo:localhost:gpu:GPU<\/ID><Type>GPU<\/Type><MaxAcceleratorSlotsPerJob>2<\/MaxAcceleratorSlotsPerJob>/,
      );
    },
  );
});
