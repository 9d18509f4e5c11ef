/**
 * The REAL ARC 6.17 command-line client against the whole CE (JEM + gateway as processes), once
 * per batch-system back end: arcproxy → arcinfo → arcsub (several xRSL/ADL descriptions with
 * uploads, one call) → arcstat → arcget (incl. subdirectories) → arccat → arcclean → arcrenew →
 * arckill → arcresume → arcsync. Every step checks the tool's exit code and the effect (states,
 * file contents, server-side records through the REST interface).
 *
 * The suite is here; arc-client-fork.test.ts and arc-client-slurm.test.ts run it per back end.
 * Slurm: a private cluster (own directory and free ports, @ce/testing/slurm), so it
 * can run next to apps/jem/test/slurm.test.ts. Skipped only when ARC / Slurm are not installed.
 */
import { execFileSync } from "node:child_process";
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { startStack, type Stack } from "@ce/testing/stack";
import { HAS_SLURM, startSlurm, type SlurmCluster } from "@ce/testing/slurm";
import {
  arc,
  HAS_ARC,
  leafCert,
  ok,
  parseArcstat,
  processesIn,
  restCall,
  submittedJobs,
  waitFor,
  type ArcJob,
  type RunResult,
} from "./arc-tools.js";

if (!HAS_ARC) console.warn("tests/arc/arc-client-*.test.ts SKIPPED: ARC client not installed (nordugrid-arc-client)");
if (HAS_ARC && !HAS_SLURM) console.warn("tests/arc/arc-client-slurm.test.ts SKIPPED (slurm-wlm/munge not installed)");

const RUN_SH = `#!/bin/sh
cat in.txt > out.txt
mkdir -p res/inner
tr a-z A-Z < deep.txt > res/inner/upper.txt
[ -f empty.txt ] && [ ! -s empty.txt ] && echo "empty input present"
cat data/nested.txt
echo "stdout line $1"
echo "stderr line" >&2
`;
const XRSL_INPUTS = `&(executable="run.sh")(arguments="A1")(jobname="e2e-xrsl")
 (inputfiles=("run.sh" "")("in.txt" "")("deep.txt" "sub/deep.txt")("empty.txt" "")("data/nested.txt" "nested.txt"))
 (outputfiles=("out.txt" "")("res/" ""))
 (stdout="stdout.txt")(stderr="stderr.txt")(gmlog="gmlog")
`;
// An empty input arrives as a chunked PUT without data; data/nested.txt is PUT into a subdirectory.
const STDOUT = "empty input present\ninput in a session subdirectory\nstdout line A1\n";
const ADL = `<?xml version="1.0" encoding="UTF-8"?>
<ActivityDescription xmlns="http://www.eu-emi.eu/es/2010/12/adl" xmlns:nordugrid-adl="http://www.nordugrid.org/es/2011/12/nordugrid-adl">
  <ActivityIdentification><Name>e2e-adl</Name></ActivityIdentification>
  <Application>
    <Executable><Path>/bin/sh</Path><Argument>-c</Argument><Argument>echo "adl says $GREETING"; cat adlin.txt</Argument></Executable>
    <Output>adl.out</Output>
    <Environment><Name>GREETING</Name><Value>hello from ADL</Value></Environment>
  </Application>
  <DataStaging>
    <InputFile><Name>adlin.txt</Name><Source><URI>adlin.txt</URI></Source></InputFile>
    <OutputFile><Name>adl.out</Name></OutputFile>
  </DataStaging>
</ActivityDescription>
`;
// Fails (exit 3) the first time and leaves a marker (kept as an output); succeeds on the rerun.
const FLAKY_SH = `#!/bin/sh
if [ -f marker ]; then echo "second run ok"; exit 0; fi
echo first > marker
echo "first run fails"
exit 3
`;
const XRSL_FLAKY = `&(executable="flaky.sh")(jobname="e2e-flaky")(rerun=1)(queue="debug")
 (inputfiles=("flaky.sh" ""))(outputfiles=("marker" ""))(stdout="flaky.out")
`;
const XRSL_SLEEP = `&(executable="/bin/sh")(arguments="-c" "echo started; exec sleep 600")(jobname="e2e-sleep")(queue="main")(stdout="sleep.out")(outputfiles=("sleep.out" ""))`;
// Output names the client must not mangle: spaces, a literal %41, UTF-8, a directory with a space.
const XRSL_NAMES = `&(executable="/bin/sh")(jobname="e2e-names")
 (arguments="-c" "echo a > 'with space.txt'; echo b > 'p%41.txt'; mkdir -p 'd i r'; echo c > 'd i r/x y.txt'; echo u > 'ü.txt'")
 (outputfiles=("with space.txt" "")("p%41.txt" "")("d i r/" "")("ü.txt" ""))`;

/** The whole lifecycle on one back end; each back end has its own file so the two run side by side. */
export function arcClientSuite(backend: "fork" | "slurm"): void {
  describe.skipIf(!HAS_ARC)(`real ARC client against the CE (${backend} back end)`, () => {
    const skip = backend === "slurm" && !HAS_SLURM;
    let slurm: SlurmCluster | undefined;
    let stack: Stack;
    let env: NodeJS.ProcessEnv;
    let work: string;
    let jobsDat: string;
    let proxyFile: string;
    let proxyMade: RunResult | undefined;
    const ids: Record<"xrsl" | "adl" | "flaky" | "sleep" | "names", string> = { xrsl: "", adl: "", flaky: "", sleep: "", names: "" };
    const run = (tool: string, args: string[], timeoutMs?: number) => arc(tool, args, { env, cwd: work, timeoutMs });
    const jobUrl = (id: string) => `${stack.url}/rest/1.0/jobs/${id}`;
    const rest = (path: string, method = "GET", body?: string) =>
      restCall({
        url: `${stack.url}/rest/1.0${path}`,
        proxyFile,
        caFile: join(stack.pki, "ca", "ca.pem"),
        method,
        body,
        headers: body ? { "content-type": "application/json" } : {},
      });
    /** Server-side view: per-item JSON result of a bulk action for one job. */
    const bulk1 = async (action: string, id: string) => {
      const r = await rest(`/jobs?action=${action}`, "POST", JSON.stringify({ job: [{ id }] }));
      expect(r.status).toBe(201);
      return (JSON.parse(r.body) as { job: Record<string, unknown>[] }).job[0]!;
    };
    const stat = async (jobIds: string[], jobsFile = jobsDat): Promise<Map<string, ArcJob>> => {
      const r = await run("arcstat", ["-j", jobsFile, "-l", ...jobIds.map(jobUrl)]);
      return parseArcstat(r.stdout);
    };
    const squeue = (name: string, format = "%T") =>
      execFileSync("squeue", ["-h", "-t", "all", "-n", name, "-o", format], {
        env: { ...process.env, SLURM_CONF: slurm!.conf },
        encoding: "utf8",
      }).trim();
    /** arcstat until every job is in the wanted client state (bounded). */
    const until = (want: Record<string, string>, timeoutMs = 90_000) =>
      waitFor(
        `arcstat states ${JSON.stringify(want)}`,
        async () => {
          const s = await stat(Object.keys(want));
          const seen = Object.fromEntries(Object.keys(want).map((id) => [id, s.get(id)?.state]));
          for (const [id, st] of Object.entries(want)) if (seen[id] !== st) throw new Error(`seen ${JSON.stringify(seen)}`);
          return s;
        },
        timeoutMs,
      );

    beforeAll(async () => {
      if (skip) return;
      if (backend === "slurm") slurm = await startSlurm(`/tmp/ce-slurm-e${process.pid}`);
      stack = await startStack({
        redisUrl: inject("redisUrl"),
        redisUsers: inject("redisUsers"),
        backend,
        env: slurm ? { SLURM_CONF: slurm.conf } : {},
        // Two queues (= Slurm partitions main and debug); flaky asks for debug, sleep for main (the
        // client's broker picks a random queue for descriptions that name none).
        config: { jobs: { queues: [{ name: "main" }, { name: "debug" }] } },
      });
      work = join(stack.state, "work");
      mkdirSync(join(work, "sub"), { recursive: true });
      jobsDat = join(stack.state, "home", "jobs.dat");
      // The user's proxy is made by the real arcproxy; the stack's pre-made proxy is only a fallback
      // so the rest of the suite still runs (the first test then fails).
      proxyFile = join(stack.state, "home", "proxy.pem");
      const a = stack.arcEnv;
      proxyMade = await arc(
        "arcproxy",
        ["-C", a.X509_USER_CERT!, "-K", a.X509_USER_KEY!, "-P", proxyFile, "-T", a.X509_CERT_DIR!, "-S", "", "-c", "validityPeriod=6H"],
        { env: a },
      );
      if (proxyMade.code !== 0) proxyFile = a.X509_USER_PROXY!;
      env = { ...a, X509_USER_PROXY: proxyFile, ...(slurm ? { SLURM_CONF: slurm.conf } : {}) };
      const files: Record<string, string> = {
        "run.sh": RUN_SH,
        "in.txt": "hello input\n",
        "sub/deep.txt": "nested file\n",
        "job1.xrsl": XRSL_INPUTS,
        "job2.adl": ADL,
        "adlin.txt": "adl input\n",
        "empty.txt": "",
        "nested.txt": "input in a session subdirectory\n",
        "flaky.sh": FLAKY_SH,
        "flaky.xrsl": XRSL_FLAKY,
        "sleep.xrsl": XRSL_SLEEP,
        "names.xrsl": XRSL_NAMES,
      };
      for (const [n, c] of Object.entries(files)) writeFileSync(join(work, n), c);
      chmodSync(join(work, "run.sh"), 0o755);
      chmodSync(join(work, "flaky.sh"), 0o755);
    }, 180_000);

    afterAll(async () => {
      await stack?.stop();
      slurm?.stop();
    }, 120_000);

    it.skipIf(skip)("arcproxy makes the user's RFC 3820 proxy", async () => {
      ok(proxyMade!, "arcproxy");
      expect(proxyMade!.stdout).toMatch(/Proxy generation succeeded/);
      const info = ok(await run("arcproxy", ["-P", proxyFile, "-i", "identity"]), "arcproxy -i identity");
      expect(info.stdout.trim()).toBe(
        leafCert(readFileSync(stack.arcEnv.X509_USER_CERT!, "utf8"))
          .subject.split("\n")
          .map((p) => `/${p}`)
          .join(""),
      );
      // The proxy is issued by the user certificate.
      expect(leafCert(readFileSync(proxyFile, "utf8")).issuer).toBe(leafCert(readFileSync(stack.arcEnv.X509_USER_CERT!, "utf8")).subject);
    });

    it.skipIf(skip)("arcinfo -c lists the arcrest endpoint and the back end", async () => {
      const brief = ok(await run("arcinfo", ["-c", stack.url]), "arcinfo");
      expect(brief.stdout).toMatch(/Computing service: localhost/);
      const full = ok(await run("arcinfo", ["-c", stack.url, "-l"]), "arcinfo -l");
      expect(full.stdout).toContain(`URL: ${stack.url}`);
      expect(full.stdout).toMatch(/Interface: org\.nordugrid\.arcrest/);
      expect(full.stdout).toMatch(/executionmanagement\.jobcreation/);
      expect(full.stdout).toMatch(/Health state: ok/);
      expect(full.stdout).toMatch(new RegExp(`Resource manager: ${backend}`, "i"));
      expect(full.stdout).toMatch(/Mapping queue: main/);
      expect(full.stdout).toMatch(/Mapping queue: debug/);
    });

    it.skipIf(skip)(
      "arcsub -T arcrest submits xRSL (with uploads) and hand-written ADL jobs in one call",
      async () => {
        const r = ok(
          await run(
            "arcsub",
            ["-C", stack.url, "-T", "arcrest", "-j", jobsDat, "job1.xrsl", "job2.adl", "flaky.xrsl", "sleep.xrsl", "names.xrsl"],
            120_000,
          ),
          "arcsub",
        );
        expect(r.stdout).toMatch(/5 of 5 jobs were submitted/);
        const urls = submittedJobs(r.stdout);
        expect(urls).toHaveLength(5);
        for (const u of urls) expect(u).toMatch(new RegExp(`^${stack.url}/rest/1\\.0/jobs/[0-9a-f-]{36}$`));
        // The local job list knows them by name.
        const s = await stat(urls.map((u) => u.replace(/.*\//, "")));
        const byName = new Map([...s.values()].map((j) => [j.name, j.id]));
        ids.xrsl = byName.get("e2e-xrsl")!;
        ids.adl = byName.get("e2e-adl")!;
        ids.flaky = byName.get("e2e-flaky")!;
        ids.sleep = byName.get("e2e-sleep")!;
        ids.names = byName.get("e2e-names")!;
        expect(new Set(Object.values(ids)).size).toBe(5);
        expect(Object.values(ids).every(Boolean)).toBe(true);
        // The client delegated once per job; the server binds each job to its delegation.
        for (const id of Object.values(ids)) {
          const item = await bulk1("delegations", id);
          expect(item["status-code"]).toBe("200");
          expect([item.delegation_id].flat()).toHaveLength(1);
        }
      },
      150_000,
    );

    // Submitted early so its minute runs out while the other checks go on; checked at the end.
    const walltimeJobs = () => join(work, "walltime.dat");
    let walltimeId = "";
    it.skipIf(skip)(
      "arcsub of a job asking for 1 minute that sleeps 2",
      async () => {
        writeFileSync(join(work, "walltime.xrsl"), `&(executable="/bin/sleep")(arguments="120")(walltime="1")(jobname="e2e-walltime")`);
        const r = ok(
          await run("arcsub", ["-C", stack.url, "-T", "arcrest", "-j", walltimeJobs(), "walltime.xrsl"], 60_000),
          "arcsub (walltime)",
        );
        walltimeId = submittedJobs(r.stdout)[0]!.replace(/.*\//, "");
      },
      90_000,
    );

    it.skipIf(skip)(
      "arcstat follows the jobs to FINISHED / FAILED (exit code 3) / Running",
      async () => {
        const s = await until({
          [ids.xrsl]: "Finished",
          [ids.adl]: "Finished",
          [ids.flaky]: "Failed",
          [ids.sleep]: "Running",
          [ids.names]: "Finished",
        });
        expect(s.get(ids.xrsl)).toMatchObject({ specificState: "FINISHED", exitCode: 0 });
        expect(s.get(ids.adl)).toMatchObject({ specificState: "FINISHED", exitCode: 0 });
        expect(s.get(ids.flaky)).toMatchObject({ specificState: "FAILED", exitCode: 3, queue: "debug" });
        expect(s.get(ids.sleep)?.queue).toBe("main");
        if (slurm) {
          expect(squeue("e2e_sleep")).toBe("RUNNING"); // really in the batch system
          expect(squeue("e2e_flaky", "%P")).toBe("debug"); // the queue is the Slurm partition
        }
        const all = ok(await run("arcstat", ["-j", jobsDat, "-a"]), "arcstat -a");
        expect(all.stdout).toMatch(/Status of 5 jobs was queried, 5 jobs returned information/);
      },
      120_000,
    );

    it.skipIf(skip)(
      "arcget downloads outputs, including a subdirectory, and cleans unless -k",
      async () => {
        const dl = join(work, "dl");
        mkdirSync(dl);
        const g1 = ok(await run("arcget", ["-j", jobsDat, "-D", dl, "-k", jobUrl(ids.xrsl)]), "arcget -k");
        expect(g1.stdout).toMatch(/successfully retrieved: 1/);
        const d1 = join(dl, ids.xrsl);
        expect(readFileSync(join(d1, "stdout.txt"), "utf8")).toBe(STDOUT);
        expect(readFileSync(join(d1, "stderr.txt"), "utf8")).toBe("stderr line\n");
        expect(readFileSync(join(d1, "out.txt"), "utf8")).toBe("hello input\n");
        expect(readFileSync(join(d1, "res", "inner", "upper.txt"), "utf8")).toBe("NESTED FILE\n");
        expect((await bulk1("status", ids.xrsl)).state).toBe("FINISHED"); // kept

        const g2 = ok(await run("arcget", ["-j", jobsDat, "-D", dl, jobUrl(ids.adl), jobUrl(ids.names)]), "arcget");
        expect(g2.stdout).toMatch(/Jobs processed: 2, successfully retrieved: 2, successfully cleaned: 2/);
        expect(readFileSync(join(dl, ids.adl, "adl.out"), "utf8")).toBe("adl says hello from ADL\nadl input\n");
        const d2 = join(dl, ids.names);
        expect(["with space.txt", "p%41.txt", "d i r/x y.txt", "ü.txt"].map((f) => readFileSync(join(d2, f), "utf8"))).toEqual([
          "a\n",
          "b\n",
          "c\n",
          "u\n",
        ]);
        for (const id of [ids.adl, ids.names]) {
          await waitFor(
            "retrieved job removed on the server",
            async () => ((await bulk1("status", id))["status-code"] === "404" ? true : undefined),
            30_000,
          );
        }
      },
      90_000,
    );

    it.skipIf(skip)("arccat shows stdout, stderr and the job log (-l)", async () => {
      const out = ok(await run("arccat", ["-j", jobsDat, jobUrl(ids.xrsl)]), "arccat");
      expect(out.stdout).toBe(STDOUT);
      const err = ok(await run("arccat", ["-j", jobsDat, "-e", jobUrl(ids.xrsl)]), "arccat -e");
      expect(err.stdout).toBe("stderr line\n");
      const log = ok(await run("arccat", ["-j", jobsDat, "-l", jobUrl(ids.xrsl)]), "arccat -l");
      expect(log.stdout).toMatch(/ACCEPTED -> PREPARING/);
      expect(log.stdout).toMatch(/INLRMS -> FINISHING/);
      expect(log.stdout).toMatch(/FINISHING -> FINISHED/);
    });

    it.skipIf(skip)(
      "arcclean removes a finished job: gone from arcstat and from the server",
      async () => {
        const r = ok(await run("arcclean", ["-j", jobsDat, jobUrl(ids.xrsl)]), "arcclean");
        expect(r.stdout).toMatch(/Jobs processed: 1, deleted: 1/);
        const s = await run("arcstat", ["-j", jobsDat, jobUrl(ids.xrsl)]);
        expect(s.code).not.toBe(0);
        expect(s.stdout + s.stderr).toMatch(/Job not found in job list/);
        await waitFor(
          "cleaned job removed on the server",
          async () => ((await bulk1("status", ids.xrsl))["status-code"] === "404" ? true : undefined),
          30_000,
        );
      },
      60_000,
    );

    it.skipIf(skip)("arcrenew replaces the running job's delegated proxy", async () => {
      const item = await bulk1("delegations", ids.sleep);
      const did = [item.delegation_id].flat()[0] as string;
      expect(did).toMatch(/^[A-Za-z0-9._-]+$/);
      const get = async () => {
        const r = await rest(`/delegations/${did}?action=get`, "POST");
        expect(r.status).toBe(200);
        return leafCert(r.body);
      };
      const before = await get();
      const renew = ok(await run("arcrenew", ["-j", jobsDat, jobUrl(ids.sleep)]), "arcrenew");
      expect(renew.stdout).toMatch(/Jobs processed: 1, renewed: 1/);
      const after = await get();
      expect(after.fingerprint256).not.toBe(before.fingerprint256);
      // Still a proxy made from the user's arcproxy proxy, and the job keeps the same delegation.
      expect(after.issuer).toBe(leafCert(readFileSync(proxyFile, "utf8")).subject);
      expect([(await bulk1("delegations", ids.sleep)).delegation_id].flat()).toEqual([did]);
    });

    it.skipIf(skip)(
      "arckill stops a long sleep job → KILLED (payload gone, batch job cancelled)",
      async () => {
        const session = join(stack.state, "session", ids.sleep);
        expect(processesIn(session, "sleep").length).toBeGreaterThan(0);
        const r = ok(await run("arckill", ["-j", jobsDat, jobUrl(ids.sleep)]), "arckill");
        expect(r.stdout).toMatch(/Jobs processed: 1, successfully killed: 1/);
        const s = await until({ [ids.sleep]: "Killed" }, 60_000);
        expect(s.get(ids.sleep)?.specificState).toBe("KILLED");
        expect((await bulk1("status", ids.sleep)).state).toBe("KILLED");
        await waitFor("the sleep payload to end", async () => (processesIn(session, "sleep").length === 0 ? true : undefined), 30_000);
        if (slurm) {
          expect(
            await waitFor(
              "Slurm to report the job cancelled",
              async () => (squeue("e2e_sleep") === "CANCELLED" ? "CANCELLED" : undefined),
              30_000,
            ),
          ).toBe("CANCELLED");
        }
      },
      90_000,
    );

    it.skipIf(skip)(
      "arcresume reruns the FAILED job (rerun=1), which then ends FINISHED",
      async () => {
        const r = ok(await run("arcresume", ["-j", jobsDat, jobUrl(ids.flaky)]), "arcresume");
        expect(r.stdout).toMatch(/Jobs processed: 1, resumed: 1/);
        const s = await until({ [ids.flaky]: "Finished" }, 90_000);
        expect(s.get(ids.flaky)).toMatchObject({ specificState: "FINISHED", exitCode: 0 });
        const out = ok(await run("arccat", ["-j", jobsDat, jobUrl(ids.flaky)]), "arccat");
        expect(out.stdout).toBe("second run ok\n");
        expect((await bulk1("status", ids.flaky)).state).toBe("FINISHED");
      },
      120_000,
    );

    it.skipIf(skip)(
      "the walltime job ends FAILED and arcstat -l says the walltime was exceeded",
      async () => {
        await waitFor(
          "walltime job failed",
          async () => ((await stat([walltimeId], walltimeJobs())).get(walltimeId)?.state === "Failed" ? true : undefined),
          200_000,
        );
        const l = ok(await run("arcstat", ["-j", walltimeJobs(), "-l", jobUrl(walltimeId)]), "arcstat -l (walltime)");
        expect(l.stdout, l.stdout).toMatch(/Walltime exceeded/);
        expect(l.stdout).not.toMatch(/terminated by SIGTERM/);
        // Gone before arcsync below counts the user's jobs.
        ok(await run("arcclean", ["-j", walltimeJobs(), jobUrl(walltimeId)]), "arcclean (walltime)");
      },
      220_000,
    );

    it.skipIf(skip)(
      "arcsync rebuilds a fresh job list with the user's remaining jobs and delegations",
      async () => {
        const fresh = join(stack.state, "home", "synced.dat");
        const did = String([(await bulk1("delegations", ids.sleep)).delegation_id].flat()[0]);
        // The client's delegation query after the listing is best effort (a failed one leaves the
        // list without delegation ids and says nothing): one more sync, as a user would, with what
        // the first one saw printed so that a pattern can be found.
        const sync = async () => {
          const since = stack.logs().length;
          const r = ok(await run("arcsync", ["-C", stack.url, "-j", fresh, "-f", "-d", "DEBUG"]), "arcsync");
          const all = ok(await run("arcstat", ["-j", fresh, "-a", "-l"]), "arcstat on the synced list");
          const seen = [...r.stderr.split("\n").filter((l) => /action=delegations|Failed|wrong response|Content:/.test(l))];
          const served = stack
            .logs()
            .slice(since)
            .split("\n")
            .filter((l) => /"path":"[^"]*\/jobs"/.test(l));
          return { r, all, diag: `arcsync (debug):\n${seen.join("\n")}\ngateway:\n${served.join("\n")}` };
        };
        let { r, all, diag } = await sync();
        if (!parseArcstat(all.stdout).get(ids.sleep)?.delegationIds.includes(did)) {
          console.warn(`arcsync: no delegation ids in the first sync; again. ${diag}`);
          ({ r, all, diag } = await sync());
        }
        const said = `arcsync said:\n${r.stdout}${r.stderr.slice(-4000)}\n${diag}`;
        expect(r.stdout, said).toMatch(/Total number of new jobs found: 2/);
        expect(r.stdout, said).toContain(jobUrl(ids.flaky));
        expect(r.stdout, said).toContain(jobUrl(ids.sleep));
        const s = parseArcstat(all.stdout);
        const shown = `arcstat said:\n${all.stdout}${all.stderr}\n${diag}`;
        expect([...s.keys()].sort(), shown).toEqual([ids.flaky, ids.sleep].sort());
        expect(s.get(ids.flaky)?.state, shown).toBe("Finished");
        expect(s.get(ids.sleep)?.state, shown).toBe("Killed");
        expect(s.get(ids.sleep)?.delegationIds, shown).toEqual([did]);
      },
      60_000,
    );

    it.skipIf(skip)("arcget of the KILLED job delivers its partial output and cleans it", async () => {
      const dl = join(work, "dl-killed");
      const g = ok(await run("arcget", ["-j", jobsDat, "-D", dl, jobUrl(ids.sleep)]), "arcget (killed)");
      expect(g.stdout).toMatch(/successfully retrieved: 1, successfully cleaned: 1/);
      expect(readFileSync(join(dl, ids.sleep, "sleep.out"), "utf8")).toBe("started\n");
      await waitFor(
        "killed job removed on the server",
        async () => ((await bulk1("status", ids.sleep))["status-code"] === "404" ? true : undefined),
        30_000,
      );
    });
  });
}
