/**
 * An ATLAS-shaped job end to end through the REAL ARC 6.17 client, on fork and on Slurm: the ADL
 * aCT posts (URL options both inside the URI and as <Option> elements, runtime environments
 * APPS/HEP/ATLAS-SITE and ENV/PROXY with an empty <Version/>, rerun 2, `@output.list`), hosts moved
 * to loopback: a rucio:// input resolved by the Rucio stand-in to a davs:// replica on a real
 * Apache mod_dav, outputs the job lists for davs:// (Apache) and root:// (a real xrootd, anonymous)
 * with the pilot's checksum metadata, and a software-area input under `staging.localInputPrefixes`.
 * A second job lists a wrong checksum and must fail with a reason naming both values.
 * Jobs are mapped to a real account (useradd; the test runs as root): xrdcp, which uploads the
 * root:// output, never runs as root, so a root JEM needs the job's account to run it.
 *
 * The servers start once; both CEs (fork, Slurm) get their jobs at once so the batch turnaround
 * overlaps. Skipped only when a part is not installed here.
 */
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { TestAccounts } from "@ce/mapping/testing";
import { enableRte, setRteParams } from "@ce/store";
import { issueHostCert } from "@ce/x509/testing";
import { checksummer } from "../../apps/jem/src/staging/checksum.js";
import { haveApache, startApache, type Apache } from "@ce/testing/apache";
import { startRucioStandIn, type RucioStandIn } from "@ce/testing/rucio";
import { testPki } from "@ce/testing/storage";
import { haveXrootd, startXrootd, type Xrootd } from "@ce/testing/xrootd";
import { startStack, type Stack } from "@ce/testing/stack";
import { HAS_SLURM, startSlurm, type SlurmCluster } from "@ce/testing/slurm";
import { arc, HAS_ARC, ok, parseArcstat, restCall, submittedJobs, waitFor, type ArcJob } from "./arc-tools.js";

const HAS_PROXY_RTE = existsSync("/usr/share/arc/rte/ENV/PROXY");
const READY = HAS_ARC && haveApache() && haveXrootd() && HAS_PROXY_RTE;
if (!READY)
  console.warn("arc-atlas.test.ts SKIPPED: needs nordugrid-arc-client, nordugrid-arc-arex (RTEs), apache2, xrootd-server/xrootd-client");
if (READY && !HAS_SLURM) console.warn("arc-atlas.test.ts: slurm back end SKIPPED (slurm-wlm/munge not installed)");

const BACKENDS = (HAS_SLURM ? ["fork", "slurm"] : ["fork"]) as Array<"fork" | "slurm">;

const adler32 = (b: Buffer) => {
  const c = checksummer("adler32");
  c.update(b);
  return c.digest();
};
const md5 = (b: Buffer) => createHash("md5").update(b).digest("hex");

const RUCIO_OPTS = "accesslatency=disk;cache=invariant;httpgetpartial=no;rucioaccount=pilot;transferprotocol=https";
const optionElements = (opts: string) =>
  opts
    .split(";")
    .map((o) => o.split("="))
    .map(([k, v]) => `<Option><Name>${k}</Name><Value>${v}</Value></Option>`)
    .join("");

/** The ADL aCT posts (production-site.md §1), with this test's hosts and payload. */
function atlasAdl(o: { name: string; rucioUri: string; queuedata: string; cric: string }): string {
  return `<?xml version="1.0" encoding="UTF-8"?>
<ActivityDescription xmlns="http://www.eu-emi.eu/es/2010/12/adl" xmlns:nordugrid-adl="http://www.nordugrid.org/es/2011/12/nordugrid-adl">
  <ActivityIdentification><Name>${o.name}</Name></ActivityIdentification>
  <Application>
    <Executable><Path>runpilot2-wrapper.sh</Path><Argument>-s</Argument><Argument>LOOPBACK</Argument><Argument>--piloturl</Argument><Argument>local</Argument></Executable>
    <Output>log.pilot.txt</Output>
    <Error>log.pilot.txt</Error>
    <Environment><Name>PANDA_JSID</Name><Value>aCT-atlas-1</Value></Environment>
    <Environment><Name>PILOT_NOKILL</Name><Value>YES</Value></Environment>
    <LoggingDirectory>gmlog</LoggingDirectory>
    <nordugrid-adl:Rerun>2</nordugrid-adl:Rerun>
    <Priority>77</Priority>
  </Application>
  <Resources>
    <QueueName>main</QueueName>
    <RuntimeEnvironment><Name>APPS/HEP/ATLAS-SITE</Name><Version/></RuntimeEnvironment>
    <RuntimeEnvironment><Name>ENV/PROXY</Name><Version/></RuntimeEnvironment>
    <IndividualCPUTime>3600</IndividualCPUTime>
    <WallTime>3600</WallTime>
  </Resources>
  <DataStaging>
    <InputFile><Name>runpilot2-wrapper.sh</Name><Source><URI>runpilot2-wrapper.sh</URI></Source><IsExecutable>true</IsExecutable></InputFile>
    <InputFile><Name>queuedata.json</Name><Source><URI>${o.queuedata}</URI>${optionElements("cache=check")}</Source></InputFile>
    <InputFile><Name>EVNT.pool.root.1</Name><Source><URI>${o.rucioUri}</URI>${optionElements(RUCIO_OPTS)}</Source></InputFile>
    <InputFile><Name>cric.json</Name><Source><URI>${o.cric}</URI></Source></InputFile>
    <OutputFile><Name>heartbeat.json</Name></OutputFile>
    <OutputFile><Name>@output.list</Name></OutputFile>
    <OutputFile><Name>log.pilot.txt</Name></OutputFile>
    <OutputFile><Name>gmlog</Name></OutputFile>
  </DataStaging>
</ActivityDescription>
`;
}

/** The payload: checks what the CE put in the session, writes outputs and the list the pilot would. */
function wrapper(outputList: string): string {
  return `#!/bin/sh
echo "site: $ATLAS_SITE_NAME"
[ -s "$X509_USER_PROXY" ] && echo "proxy: present"
[ -L cric.json ] && echo "cric.json -> $(readlink cric.json)"
echo "cric: $(cat cric.json)"
echo "queuedata: $(cat queuedata.json)"
echo "evnt md5: $(md5sum < EVNT.pool.root.1 | cut -d' ' -f1)"
{ cat EVNT.pool.root.1; echo simulated; } > HITS.pool.root.1
echo "pilot log" > log.tgz
cp log.tgz log.os.tgz
echo '{"state":"finished"}' > heartbeat.json
cat > output.list <<'EOF'
${outputList}
EOF
`;
}

interface Ce {
  backend: "fork" | "slurm";
  stack: Stack;
  env: NodeJS.ProcessEnv;
  work: string;
  jobsDat: string;
  proxyFile: string;
  good: string;
  bad: string;
  /** The job posted directly to the REST interface with a local software-area input. */
  local: string;
}

describe.skipIf(!READY)("an ATLAS-shaped job through the real ARC client", () => {
  let apache: Apache;
  let xrd: Xrootd;
  let rucio: RucioStandIn;
  let slurm: SlurmCluster | undefined;
  let shared: string;
  const accounts = new TestAccounts();
  let account: string;
  let cvmfs: string;
  const ces = new Map<string, Ce>();
  const evnt = Buffer.from(Array.from({ length: 4000 }, (_, i) => `event ${i}\n`).join(""));
  const hits = Buffer.concat([evnt, Buffer.from("simulated\n")]);
  const log = Buffer.from("pilot log\n");
  const davsBase = () => apache.httpsUrl.replace("https://", "davs://");

  const run = (ce: Ce, tool: string, args: string[], timeoutMs?: number) => arc(tool, args, { env: ce.env, cwd: ce.work, timeoutMs });
  const jobUrl = (ce: Ce, id: string) => `${ce.stack.url}/rest/1.0/jobs/${id}`;
  const statL = async (ce: Ce, ids: string[]) => {
    const r = await run(ce, "arcstat", ["-j", ce.jobsDat, "-l", ...ids.map((id) => jobUrl(ce, id))]);
    return { out: r.stdout, jobs: parseArcstat(r.stdout) };
  };
  const until = (ce: Ce, want: Record<string, string>, timeoutMs = 60_000) =>
    waitFor(
      `${ce.backend}: arcstat states ${JSON.stringify(want)}`,
      async () => {
        const s = await statL(ce, Object.keys(want));
        const seen = Object.fromEntries(Object.keys(want).map((id) => [id, s.jobs.get(id)?.state]));
        for (const [id, st] of Object.entries(want)) if (seen[id] !== st) throw new Error(`seen ${JSON.stringify(seen)}`);
        return s;
      },
      timeoutMs,
    );

  /** arcstat -l once every job is over (whatever the end), so a wrong end fails at once with the client's text. */
  const settled = (ce: Ce, ids: string[], timeoutMs: number) =>
    waitFor(
      `${ce.backend}: jobs ${ids.join(", ")} over`,
      async () => {
        const s = await statL(ce, ids);
        return ids.every((id) => ["Finished", "Failed", "Killed", "Deleted"].includes(s.jobs.get(id)?.state ?? "")) ? s : undefined;
      },
      timeoutMs,
    );

  async function startCe(backend: "fork" | "slurm", caFile: string): Promise<Ce> {
    const stack = await startStack({
      redisUrl: inject("redisUrl"),
      redisUsers: inject("redisUsers"),
      backend,
      env: slurm && backend === "slurm" ? { SLURM_CONF: slurm.conf } : {},
      config: {
        jobs: { queues: [{ name: "main" }] },
        mapping: { rules: [{ name: "atlas", match: "*", user: account }] },
        staging: {
          caFile,
          allowNetworks: ["127.0.0.0/8", "::1/128"],
          localInputPrefixes: [cvmfs],
          maxRetries: 1,
          retryBaseMs: 200,
          timeoutMs: 30_000,
        },
      },
      prepare(state) {
        // The site's RTEs as `ceadm rte` leaves them: Debian's stock ENV/PROXY (the CA dir it
        // copies is a parameter) and a site-written APPS/HEP/ATLAS-SITE.
        const cfg = {
          paths: { controlDir: join(state, "control"), rteDir: join(state, "rte") },
          jobs: { runtimeEnvironments: [], defaultRuntimeEnvironments: [] },
        };
        mkdirSync(join(state, "rte", "APPS", "HEP"), { recursive: true });
        writeFileSync(join(state, "rte", "APPS", "HEP", "ATLAS-SITE"), '[ "$1" = 1 ] && export ATLAS_SITE_NAME=LOOPBACK\ntrue\n');
        enableRte(cfg, "APPS/HEP/ATLAS-SITE");
        enableRte(cfg, "ENV/PROXY");
        setRteParams(cfg, "ENV/PROXY", [`X509_CERT_DIR=${join(state, "pki", "ca")}`]);
      },
    });
    const work = join(stack.state, "work");
    mkdirSync(work, { recursive: true });
    const proxyFile = join(stack.state, "home", "proxy.pem");
    const a = stack.arcEnv;
    ok(
      await arc(
        "arcproxy",
        ["-C", a.X509_USER_CERT!, "-K", a.X509_USER_KEY!, "-P", proxyFile, "-T", a.X509_CERT_DIR!, "-S", "", "-c", "validityPeriod=6H"],
        { env: a },
      ),
      "arcproxy",
    );
    return {
      backend,
      stack,
      env: { ...a, X509_USER_PROXY: proxyFile },
      work,
      jobsDat: join(stack.state, "home", "jobs.dat"),
      proxyFile,
      good: "",
      bad: "",
      local: "",
    };
  }

  /**
   * The real client drops every `file:` source from the ADL it posts and uploads the file itself
   * (ARC's ADLParser UnParse; aCT's rest.py likewise), so a software-area path never reaches the
   * CE through it. The CE's own handling is shown with the same ADL element posted directly, under
   * the delegation arcsub made for the good job, and followed with arcsync/arcstat/arcget.
   */
  async function postLocalJob(ce: Ce, cric: string): Promise<string> {
    const rest = (path: string, body: string, type: string) =>
      restCall({
        url: `${ce.stack.url}/rest/1.0${path}`,
        proxyFile: ce.proxyFile,
        caFile: join(ce.stack.pki, "ca", "ca.pem"),
        method: "POST",
        body,
        headers: { "content-type": type },
      });
    const d = await rest("/jobs?action=delegations", JSON.stringify({ job: [{ id: ce.good }] }), "application/json");
    const delegation = [(JSON.parse(d.body) as { job: Array<{ delegation_id: string | string[] }> }).job[0]!.delegation_id].flat()[0]!;
    const adl = `<?xml version="1.0"?>
<ActivityDescription xmlns="http://www.eu-emi.eu/es/2010/12/adl" xmlns:nordugrid-adl="http://www.nordugrid.org/es/2011/12/nordugrid-adl">
  <ActivityIdentification><Name>atlas-local-${ce.backend}</Name></ActivityIdentification>
  <Application>
    <Executable><Path>/bin/sh</Path><Argument>-c</Argument><Argument>echo "cric.json -> $(readlink cric.json)"; cat cric.json</Argument></Executable>
    <Output>local.out</Output>
  </Application>
  <Resources><QueueName>main</QueueName></Resources>
  <DataStaging>
    <nordugrid-adl:DelegationID>${delegation}</nordugrid-adl:DelegationID>
    <InputFile><Name>cric.json</Name><Source><URI>file://${cric}</URI></Source></InputFile>
    <OutputFile><Name>local.out</Name></OutputFile>
  </DataStaging>
</ActivityDescription>`;
    const r = await rest("/jobs?action=new", adl, "application/xml");
    type Item = { id?: string; "status-code": string };
    const item = [(JSON.parse(r.body) as { job: Item | Item[] }).job].flat()[0]!;
    if (item["status-code"] !== "201" || !item.id) throw new Error(`REST submission of the local-input job refused: ${r.body}`);
    return item.id;
  }

  beforeAll(async () => {
    account = await accounts.add("at");
    shared = mkdtempSync(join(tmpdir(), "ce-atlas-"));
    chmodSync(shared, 0o755);
    // The software area (a /cvmfs stand-in): world-readable, as the job reads it with its own rights.
    cvmfs = join(shared, "cvmfs", "atlas.example.org");
    mkdirSync(join(cvmfs, "repo"), { recursive: true });
    for (const d of [join(shared, "cvmfs"), cvmfs, join(cvmfs, "repo")]) chmodSync(d, 0o755);
    writeFileSync(join(cvmfs, "repo", "cric.json"), '{"queue":"LOOPBACK"}', { mode: 0o644 });
    const pki = testPki();
    const caFile = join(shared, "storage-ca.pem");
    writeFileSync(caFile, pki.ca.certPem);
    if (BACKENDS.includes("slurm")) slurm = await startSlurm(`/tmp/ce-slurm-a${process.pid}`);
    [apache, xrd, rucio] = await Promise.all([
      startApache(issueHostCert(pki.ca, { hostnames: ["localhost", "127.0.0.1"] })),
      startXrootd(),
      startRucioStandIn(pki),
    ]);
    mkdirSync(join(apache.docRoot, "rucio", "mc23"), { recursive: true });
    writeFileSync(join(apache.docRoot, "rucio", "mc23", "EVNT.pool.root.1"), evnt);
    writeFileSync(join(apache.docRoot, "queuedata.json"), '{"queue":"LOOPBACK","maxtime":3600}');
    rucio.dids.set("mc23_13p6TeV:EVNT.pool.root.1", {
      bytes: evnt.length,
      adler32: adler32(evnt),
      md5: md5(evnt),
      pfns: [{ pfn: `${davsBase()}/rucio/mc23/EVNT.pool.root.1`, rse: "LOOPBACK_DATADISK" }],
    });
    for (const ce of await Promise.all(BACKENDS.map((b) => startCe(b, caFile)))) ces.set(ce.backend, ce);
  }, 180_000);

  afterAll(async () => {
    await Promise.all([...ces.values()].map((ce) => ce.stack.stop()));
    slurm?.stop();
    await Promise.all([apache?.close(), xrd?.close(), rucio?.close()]);
    if (shared) rmSync(shared, { recursive: true, force: true });
    await accounts.remove();
  }, 120_000);

  it("arcsub submits the good and the wrong-checksum job to every CE at once", async () => {
    await Promise.all(
      [...ces.values()].map(async (ce) => {
        const b = ce.backend;
        const rucioUri = `rucio://${rucio.url.slice("https://".length)};${RUCIO_OPTS}/replicas/mc23_13p6TeV/EVNT.pool.root.1`;
        const queuedata = `${apache.httpsUrl};cache=check/queuedata.json`;
        const cric = join(cvmfs, "repo", "cric.json");
        const goodList = [
          `HITS.pool.root.1 ${davsBase()}/atlas/${b}/HITS.pool.root.1:checksumtype=adler32:checksumvalue=${adler32(hits)}`,
          `log.tgz ${xrd.url}//atlas/${b}/log.tgz:checksumtype=md5:checksumvalue=${md5(log)}`,
          // The pilot's S3 object-store line: uploading it may fail without failing the job.
          `log.os.tgz rucio://${rucio.url.slice("https://".length)};failureallowed=yes/objectstores/s3+rucio://os.example.org:443/LOOPBACK_OS/write`,
        ].join("\n");
        const badList = `HITS.pool.root.1 ${davsBase()}/atlas/${b}/bad/HITS.pool.root.1:checksumtype=adler32:checksumvalue=0badc0de`;
        mkdirSync(join(ce.work, "good"));
        mkdirSync(join(ce.work, "bad"));
        writeFileSync(join(ce.work, "good", "runpilot2-wrapper.sh"), wrapper(goodList), { mode: 0o755 });
        writeFileSync(join(ce.work, "bad", "runpilot2-wrapper.sh"), wrapper(badList), { mode: 0o755 });
        writeFileSync(join(ce.work, "good", "job.adl"), atlasAdl({ name: `atlas-good-${b}`, rucioUri, queuedata, cric }));
        writeFileSync(join(ce.work, "bad", "job.adl"), atlasAdl({ name: `atlas-bad-${b}`, rucioUri, queuedata, cric }));
        // One arcsub per job: the client resolves an input's relative path against its cwd.
        const [g, x] = await Promise.all(
          ["good", "bad"].map((k) =>
            arc("arcsub", ["-C", ce.stack.url, "-T", "arcrest", "-j", ce.jobsDat, "job.adl"], {
              env: ce.env,
              cwd: join(ce.work, k),
              timeoutMs: 60_000,
            }),
          ),
        );
        ce.good = submittedJobs(ok(g!, `arcsub (${b}, good)`).stdout)[0]!.replace(/.*\//, "");
        ce.bad = submittedJobs(ok(x!, `arcsub (${b}, bad)`).stdout)[0]!.replace(/.*\//, "");
        ce.local = await postLocalJob(ce, cric);
      }),
    );
    for (const ce of ces.values()) expect([ce.good, ce.bad, ce.local].every((id) => /^[0-9a-f-]{36}$/.test(id))).toBe(true);
  }, 90_000);

  describe.each(BACKENDS)("%s back end", (backend) => {
    let good: ArcJob | undefined;
    let statOut = "";

    it("both jobs end: the good one FINISHED, the wrong checksum FAILED with both values in arcstat -l", async () => {
      const ce = ces.get(backend)!;
      const s = await settled(ce, [ce.good, ce.bad], 75_000);
      good = s.jobs.get(ce.good);
      statOut = s.out;
      expect(good, s.out).toMatchObject({ state: "Finished", specificState: "FINISHED", exitCode: 0 });
      expect(s.jobs.get(ce.bad)?.state, s.out).toBe("Failed");
      const badBlock = s.out.slice(s.out.indexOf(`Job: ${jobUrl(ce, ce.bad)}`));
      expect(badBlock, s.out).toMatch(/0badc0de/);
      expect(badBlock, s.out).toContain(adler32(hits));
      expect(existsSync(join(apache.docRoot, "atlas", backend, "bad", "HITS.pool.root.1"))).toBe(false);
    }, 90_000);

    it("arcresume (rerun=2) after the list is corrected in the session: the stage-out is redone, FINISHED", async () => {
      const ce = ces.get(backend)!;
      const fixed = `HITS.pool.root.1 ${davsBase()}/atlas/${backend}/bad/HITS.pool.root.1:checksumtype=adler32:checksumvalue=${adler32(hits)}\n`;
      const put = await restCall({
        url: `${jobUrl(ce, ce.bad)}/session/output.list`,
        method: "PUT",
        body: fixed,
        proxyFile: ce.proxyFile,
        caFile: join(ce.stack.pki, "ca", "ca.pem"),
      });
      expect(put.status, put.body).toBeLessThan(300);
      ok(await run(ce, "arcresume", ["-j", ce.jobsDat, jobUrl(ce, ce.bad)]), "arcresume");
      const s = await until(ce, { [ce.bad]: "Finished" }, 60_000);
      expect(s.jobs.get(ce.bad)).toMatchObject({ specificState: "FINISHED", exitCode: 0 });
      expect(readFileSync(join(apache.docRoot, "atlas", backend, "bad", "HITS.pool.root.1")).equals(hits)).toBe(true);
      const log = ok(await run(ce, "arccat", ["-j", ce.jobsDat, "-l", jobUrl(ce, ce.bad)]), "arccat -l").stdout;
      expect(log).toContain("Job restarted from FINISHING (1 restarts left)");
    }, 90_000);

    it("the rucio:// input was resolved and downloaded, the RTEs ran, arcget fetches what aCT reads", async () => {
      const ce = ces.get(backend)!;
      expect(good, statOut).toBeDefined();
      const dl = join(ce.work, "dl");
      ok(await run(ce, "arcget", ["-j", ce.jobsDat, "-D", dl, "-k", jobUrl(ce, ce.good)]), "arcget");
      const out = readFileSync(join(dl, ce.good, "log.pilot.txt"), "utf8");
      expect(out).toContain("site: LOOPBACK");
      expect(out).toContain("proxy: present");
      // Uploaded by arcsub from the client's file system (see postLocalJob): a copy, not a link.
      expect(out).not.toContain("cric.json ->");
      expect(out).toContain('cric: {"queue":"LOOPBACK"}');
      expect(out).toContain('queuedata: {"queue":"LOOPBACK","maxtime":3600}');
      expect(out).toContain(`evnt md5: ${md5(evnt)}`);
      expect(readFileSync(join(dl, ce.good, "heartbeat.json"), "utf8")).toBe('{"state":"finished"}\n');
      expect(rucio.requests.some((q) => q.path === "/replicas/mc23_13p6TeV/EVNT.pool.root.1" && q.account === "pilot")).toBe(true);
      expect(
        (await apache.requests()).some((q) => q.method === "GET" && q.path === "/rucio/mc23/EVNT.pool.root.1" && q.status === 200),
      ).toBe(true);
      expect(readFileSync(join(dl, ce.good, "output.list"), "utf8")).toContain(`${davsBase()}/atlas/${backend}/HITS.pool.root.1`);
      // The jobs' logs (REST diagnose/errors, what aCT fetches as gmlog/errors) say where the input
      // came from: both jobs name the same rucio:// input with cache=invariant, so one of them
      // downloaded it (naming the replica Rucio gave) and the other was served the cached copy.
      const log = ok(await run(ce, "arccat", ["-j", ce.jobsDat, "-l", jobUrl(ce, ce.good)]), "arccat -l").stdout;
      const other = ok(await run(ce, "arccat", ["-j", ce.jobsDat, "-l", jobUrl(ce, ce.bad)]), "arccat -l (bad)").stdout;
      const replica = `resolved by Rucio to ${davsBase()}/rucio/mc23/EVNT.pool.root.1`;
      const input = /Staging: (downloaded|from the cache:) rucio:\S*EVNT\.pool\.root\.1 -> \/EVNT\.pool\.root\.1/;
      expect(log).toMatch(input);
      expect(other).toMatch(input);
      expect(`${log}\n${other}`).toContain(replica);
      expect(log).toMatch(/upload of \/log\.os\.tgz to rucio:\/\/127\.0\.0\.1:\d+\/objectstores\/.* failed/);
    }, 60_000);

    it("a software-area input under staging.localInputPrefixes is linked into the session (REST-posted job)", async () => {
      const ce = ces.get(backend)!;
      const synced = join(ce.work, "synced.dat");
      ok(await run(ce, "arcsync", ["-C", ce.stack.url, "-j", synced, "-f"]), "arcsync");
      const s = await waitFor(
        `${backend}: local-input job finished`,
        async () => {
          const r = await run(ce, "arcstat", ["-j", synced, "-l", jobUrl(ce, ce.local)]);
          const j = parseArcstat(r.stdout).get(ce.local);
          if (j?.state === "Failed") throw new Error(r.stdout);
          return j?.state === "Finished" ? j : undefined;
        },
        60_000,
      );
      expect(s.exitCode).toBe(0);
      const dl = join(ce.work, "dl-local");
      ok(await run(ce, "arcget", ["-j", synced, "-D", dl, jobUrl(ce, ce.local)]), "arcget (local)");
      expect(readFileSync(join(dl, ce.local, "local.out"), "utf8")).toBe(
        `cric.json -> ${join(cvmfs, "repo", "cric.json")}\n{"queue":"LOOPBACK"}`,
      );
    }, 90_000);

    it("the outputs are on Apache (davs://) and xrootd (root://) with matching adler32 and md5", () => {
      const onDav = readFileSync(join(apache.docRoot, "atlas", backend, "HITS.pool.root.1"));
      expect(adler32(onDav)).toBe(adler32(hits));
      expect(onDav.equals(hits)).toBe(true);
      const onXrd = readFileSync(join(xrd.dataDir, "atlas", backend, "log.tgz"));
      expect(md5(onXrd)).toBe(md5(log));
      const port = xrd.url.replace(/.*:/, "");
      const served = execFileSync("xrdfs", [`localhost:${port}`, "query", "checksum", `/atlas/${backend}/log.tgz`], {
        encoding: "utf8",
        timeout: 10_000,
      });
      expect(served.trim()).toBe(`adler32 ${adler32(log)}`);
    });
  });
});
