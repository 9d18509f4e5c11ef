import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { enableRte } from "@ce/store";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { renderFileList } from "@ce/controldir";
import { ADL, startTestGateway, XRSL, xmlAll, type J, type TestGateway } from "./harness.js";

let t: TestGateway;
beforeAll(async () => {
  t = await startTestGateway(inject("redisUrl"), {
    jobs: {
      runtimeEnvironments: ["ENV/PROXY", "APPS/HEP/ATLAS-1.2.3"],
      queues: [{ name: "main" }, { name: "long" }, { name: "vip", allow: ["dn:*Bob*"] }],
      maxRerun: 3,
    },
    gateway: { limits: { descriptionBytes: 64 * 1024, jobsPerSubmission: 50 } },
  });
});
afterAll(async () => t?.close());

const post = (v: string, body: string, o: { query?: string; ct?: string; accept?: string; as?: "alice" | "bob" } = {}) =>
  t.request("POST", `${t.rest}/${v}/jobs?action=new${o.query ?? ""}`, {
    body,
    accept: o.accept ?? "application/json",
    headers: o.ct ? { "content-type": o.ct } : {},
    ...(o.as ? { as: o.as } : {}),
  });

describe.each(["1.0", "1.1"])("E4 submission under %s", (v) => {
  it("ADL without Content-Type, Accept text/xml: exactly what the ARC client expects", async () => {
    const r = await post(v, ADL(), { accept: "text/xml" });
    expect(r.status).toBe(201);
    expect(r.headers["content-type"]).toBe("application/xml");
    expect(r.text).toMatch(
      /^<jobs><job><status-code>201<\/status-code><reason>Created<\/reason><id>[0-9a-f-]{36}<\/id><state>ACCEPTING<\/state><\/job><\/jobs>$/,
    );
  });
  it("xRSL with application/rsl; JSON forced arrays and string codes", async () => {
    const r = await post(v, XRSL(), { ct: "application/rsl" });
    expect(r.status).toBe(201);
    const j = r.json();
    expect(Array.isArray(j.job)).toBe(true);
    expect(j.job[0]).toMatchObject({ "status-code": "201", reason: "Created", state: "ACCEPTING" });
  });
  it("multi xRSL with + and ADL ActivityDescriptions: results in order, invalid item → 400", async () => {
    const r = await post(v, `+(${XRSL("a")})(&(executable="/bin/x")(cputime="abc"))(${XRSL("c")})`);
    expect(r.status).toBe(201);
    const items = r.json().job;
    expect(items.map((i: J) => i["status-code"])).toEqual(["201", "400", "201"]);
    expect(items[1].id).toBeUndefined();
    expect(items[1].reason).toMatch(/cputime|CPU/i);
    const adl = `<ActivityDescriptions>${ADL("x")}${ADL("y")}</ActivityDescriptions>`;
    const r2 = await post(v, adl, { ct: "application/xml" });
    expect(r2.json().job.map((i: J) => i["status-code"])).toEqual(["201", "201"]);
  });
  it("HTML rendering of a submission", async () => {
    const r = await post(v, XRSL(), { accept: "text/html" });
    expect(r.status).toBe(201);
    expect(r.text).toContain("ACCEPTING");
  });
});

describe("control files, record and queue", () => {
  it("writes the control files (no status: diagnose renders it from the record), record and advance job", async () => {
    const r = await post(
      "1.0",
      XRSL("files", '(inputfiles=("in.txt" "")("remote" "https://example.org/a b"))(outputfiles=("out.txt" ""))(rerun=9)'),
    );
    const id = r.json().job[0].id as string;
    const c = t.gw.services.control;
    for (const f of ["description", "spec", "local"] as const) expect(existsSync(c.file(id, f))).toBe(true);
    // input/output are rendered from spec on demand; input_status appears with its first line;
    // status is the JEM's, from the job's first state move on.
    for (const f of ["input", "output", "input_status", "status"] as const) expect(existsSync(c.file(id, f))).toBe(false);
    expect(readFileSync(c.file(id, "description"), "utf8")).toContain('(jobname="files")');
    const local = readFileSync(c.file(id, "local"), "utf8");
    expect(local).toContain(`subject=${t.pki.dn.alice}`);
    expect(local).toContain("interface=org.nordugrid.arcrest");
    expect(local).toContain("queue=main");
    expect(renderFileList("input", readFileSync(c.file(id, "spec"), "utf8"))).toContain("/remote https://example.org/a\\ b");
    expect(JSON.parse(readFileSync(c.file(id, "spec"), "utf8")).jobName).toBe("files");
    expect(existsSync(c.sessionDir(id))).toBe(true);
    const rec = await t.gw.services.jobs.get(id);
    expect(rec).toMatchObject({ owner: t.pki.dn.alice, queue: "main", rest: "ACCEPTING", rerun: 3, jobName: "files" });
    // The commit itself put the job on the JEM's work list (due now, or already claimed by the JEM).
    const s = await t.gw.services.advance.scoreOf(id);
    expect(s.due !== undefined || s.inflight !== undefined || (await t.gw.services.jobs.get(id))?.rest !== "ACCEPTING").toBe(true);
  });
});

describe("per-item failures", () => {
  it("unknown RTE → 500 naming it; known RTE (with and without version) → 201", async () => {
    const r = await post(
      "1.1",
      `+(${XRSL()}(runtimeenvironment="APPS/NOPE"))(${XRSL()}(runtimeenvironment="APPS/HEP/ATLAS"))(${XRSL()}(runtimeenvironment="APPS/HEP/ATLAS-1.2.3"))`,
    );
    const items = r.json().job;
    expect(items[0]).toEqual({ "status-code": "500", reason: "Requested runtime environment APPS/NOPE is missing" });
    expect(items[1]["status-code"]).toBe("201");
    expect(items[2]["status-code"]).toBe("201");
  });
  it("unknown queue → 400; queue not allowed for this user → 403; allowed user → 201", async () => {
    expect((await post("1.0", XRSL("q", '(queue="nope")'))).json().job[0]["status-code"]).toBe("400");
    const denied = (await post("1.0", XRSL("q", '(queue="vip")'))).json().job[0];
    expect(denied["status-code"]).toBe("403");
    expect(denied.reason).toContain("vip");
    expect((await post("1.0", XRSL("q", '(queue="vip")'), { as: "bob" })).json().job[0]["status-code"]).toBe("201");
  });
  it("delegations must exist and belong to the caller", async () => {
    const mine = await t.gw.services.delegations.create(t.pki.dn.alice, "x509", { privateKeyPem: "k" });
    const bobs = await t.gw.services.delegations.create(t.pki.dn.bob, "x509", { privateKeyPem: "k" });
    const ok = (await post("1.0", XRSL("d", `(delegationid="${mine}")`))).json().job[0];
    expect(ok["status-code"]).toBe("201");
    const rec = await t.gw.services.jobs.get(ok.id);
    expect(rec?.mainDelegation).toBe(mine);
    expect(await t.gw.services.delegations.jobsOf(mine)).toContain(ok.id);
    const foreign = (await post("1.0", XRSL("d", `(delegationid="${bobs}")`))).json().job[0];
    expect(foreign).toEqual({ "status-code": "400", reason: `Delegation ${bobs} not found` });
    const perFile = (await post("1.0", XRSL("d", `(inputfiles=("a" "https://x.org/a" "delegationid=${bobs}"))`))).json().job[0];
    expect(perFile["status-code"]).toBe("400");
  });
  it("delegations of a job: delegation_id is a JSON array even with one element (spec), [] with none", async () => {
    const mine = await t.gw.services.delegations.create(t.pki.dn.alice, "x509", { privateKeyPem: "k" });
    const withOne = (await post("1.1", XRSL("d", `(delegationid="${mine}")`))).json().job[0].id as string;
    const without = (await post("1.1", XRSL("n"))).json().job[0].id as string;
    for (const v of ["1.0", "1.1"]) {
      const r = await t.request("POST", `${t.rest}/${v}/jobs?action=delegations`, {
        body: JSON.stringify({ job: [{ id: withOne }, { id: without }] }),
        headers: { "content-type": "application/json" },
        accept: "application/json",
      });
      expect(r.status).toBe(201);
      const [one, none] = r.json().job as J[];
      expect(one).toEqual({ "status-code": "200", reason: "OK", id: withOne, delegation_id: [mine] });
      expect(none.delegation_id).toEqual([]);
    }
  });
});

describe("descriptions that do not parse: per-item 400 inside 201 (decisions #20)", () => {
  const only = async (body: string, o: { ct?: string; accept?: string } = {}) => {
    const r = await post("1.0", body, o);
    expect(r.status).toBe(201);
    const items = r.json().job as J[];
    expect(items).toHaveLength(1);
    expect(items[0]["status-code"]).toBe("400");
    expect(items[0].id).toBeUndefined();
    return items[0].reason as string;
  };
  it("malformed xRSL and XML, and a body that is no description at all", async () => {
    expect(await only("&(executable=")).toMatch(/^xRSL syntax error at line 1, column 14/);
    expect(await only("<adl:ActivityDescription xmlns:adl='x'><oops></adl:ActivityDescription>")).toMatch(/^ADL syntax error/);
    expect(await only("hello")).toMatch(/not a job description/);
    expect(await only("<JobDefinition/>", { ct: "application/xml" })).toMatch(/not an ADL ActivityDescription/);
    // With a declared language, a body that is neither is read as that language.
    expect(await only("hello", { ct: "application/rsl" })).toMatch(/^xRSL syntax error at line 1, column 1: expected '&', '\|' or '\+'/);
    expect(await only("hello", { ct: "application/xml" })).toMatch(/^ADL syntax error/);
  });
  it("the ARC client's shape: XML, no Content-Type", async () => {
    const r = await post("1.0", "&(executable=", { accept: "text/xml" });
    expect(r.status).toBe(201);
    expect(r.text).toMatch(
      /^<jobs><job><status-code>400<\/status-code><reason>xRSL syntax error at line 1, column 14: [^<]+<\/reason><\/job><\/jobs>$/,
    );
  });
  it("one broken part of a + bundle: the others are created", async () => {
    const r = await post("1.1", `+(${XRSL("a")})(&(executable /bin/x))(${XRSL("c")}) junk`);
    expect(r.status).toBe(201);
    const items = r.json().job as J[];
    expect(items.map((i) => i["status-code"])).toEqual(["201", "400", "201", "400"]);
    expect(items[1].reason).toMatch(/expected an operator .* after attribute 'executable'/);
    expect(items[3].reason).toMatch(/Junk at end/);
    for (const i of [0, 2]) expect(await t.gw.services.jobs.get(items[i].id)).toMatchObject({ rest: "ACCEPTING" });
  });
  it("one ActivityDescription that is not well-formed: the others are created", async () => {
    const ns = 'xmlns:adl="http://www.eu-emi.eu/es/2010/12/adl"';
    const bad = "<adl:ActivityDescription><adl:Application><adl:Executable></adl:Application></adl:ActivityDescription>";
    const body = `<adl:ActivityDescriptions ${ns}>${ADL("x").replace(/ xmlns:[^ >]+/g, "")}${bad}${ADL("z").replace(/ xmlns:[^ >]+/g, "")}</adl:ActivityDescriptions>`;
    const r = await post("1.1", body, { ct: "application/xml" });
    expect(r.status).toBe(201);
    const items = r.json().job as J[];
    expect(items.map((i) => i["status-code"])).toEqual(["201", "400", "201"]);
    expect(items[1].reason).toMatch(/^ADL syntax error/);
    expect((await t.gw.services.jobs.get(items[2].id))?.jobName).toBe("z");
  });
  it("a cap exceeded by one description is its per-item 400 naming the cap", async () => {
    let chain = '(rsl_substitution=("V0" "0123456789abcdef"))';
    for (let i = 1; i <= 30; i++) chain += `(rsl_substitution=("V${i}" $(V${i - 1})#$(V${i - 1})))`;
    const r = await post("1.1", `+(${XRSL("ok")})(${XRSL("bomb", `${chain}(arguments=$(V30))`)})`);
    const items = r.json().job as J[];
    expect(items.map((i) => i["status-code"])).toEqual(["201", "400"]);
    expect(items[1].reason).toMatch(/exceeds the limit maxValueChars=131072/);
  });
});

describe("xRSL time values read as ARC reads them", () => {
  it.each([
    ['"2 minutes"', 120],
    ['"1 hour 30 minutes"', 5400],
    ['"1h30m"', 5400],
    ['"90"', 5400],
    ["90", 5400],
    ['"PT10M"', 600],
  ])("walltime=%s → %i s", async (value, seconds) => {
    const r = await post("1.1", XRSL("t", `(walltime=${value})(cputime=${value})(lifetime=${value})(gridtime=${value})`));
    const item = r.json().job[0];
    expect(item["status-code"]).toBe("201");
    const rec = await t.gw.services.jobs.get(item.id);
    expect(rec?.summary).toMatchObject({ wallTime: seconds, cpuTime: seconds });
  });
  it.each(["walltime", "cputime", "lifetime", "gridtime"])("invalid %s → per-item 400 naming the attribute", async (attr) => {
    const item = (await post("1.1", XRSL("t", `(${attr}="an hour")`))).json().job[0];
    expect(item["status-code"]).toBe("400");
    expect(item.reason).toMatch(new RegExp(`'${attr}'.*'an hour' is not a time`));
  });
});

describe("whole-request errors", () => {
  it("JSON bodies → 415; unknown media type → 415; type/body mismatch → 400", async () => {
    expect((await post("1.0", '{"job":1}')).status).toBe(415);
    expect((await post("1.0", XRSL(), { ct: "application/json" })).status).toBe(415);
    expect((await post("1.0", XRSL(), { ct: "image/png" })).status).toBe(415);
    expect((await post("1.0", XRSL(), { ct: "application/xml" })).status).toBe(400);
    // A form encoding is never read as "look at the body" (cross-site requests: docs/security.md).
    expect((await post("1.0", XRSL(), { ct: "application/x-www-form-urlencoded" })).status).toBe(415);
    expect((await post("1.0", XRSL(), { ct: "text/plain" })).status).toBe(415);
  });
  it("empty / whitespace body → 400 (there is no item to answer for)", async () => {
    expect((await post("1.0", "")).status).toBe(400);
    expect((await post("1.0", "   \n")).status).toBe(400);
  });
  it("oversized body → 413", async () => {
    const r = await post("1.0", XRSL("big", `(arguments="${"x".repeat(70 * 1024)}")`));
    expect(r.status).toBe(413);
    expect(r.json()["status-code"]).toBe("413");
  });
  it("too many descriptions → 413 naming the limit, for xRSL and ADL", async () => {
    const many = "+" + Array.from({ length: 51 }, (_, i) => `(${XRSL(`m${i}`)})`).join("");
    const r = await post("1.0", many);
    expect(r.status).toBe(413);
    expect(r.json().reason).toMatch(/limit maxDescriptions=50/);
    const adl = `<ActivityDescriptions>${"<ActivityDescription/>".repeat(51)}</ActivityDescriptions>`;
    expect((await post("1.0", adl)).status).toBe(413);
  });
  it("missing or unknown action → 400; PUT/DELETE on /jobs → 405 with Allow", async () => {
    expect((await t.request("POST", `${t.rest}/1.0/jobs`, { body: XRSL() })).status).toBe(400);
    const bogus = await t.request("POST", `${t.rest}/1.0/jobs?action=bogus`, { body: XRSL(), accept: "application/json" });
    expect(bogus.status).toBe(400);
    expect(bogus.json().reason).toContain("bogus");
    for (const m of ["PUT", "DELETE", "PATCH"]) {
      const r = await t.request(m, `${t.rest}/1.1/jobs`);
      expect(r.status).toBe(405);
      expect(r.headers.allow).toBe("GET, HEAD, POST");
    }
  });
});

describe("1.1 parameters", () => {
  it("instances=N creates N unique jobs; under 1.0 the parameter is ignored", async () => {
    const r = await post("1.1", XRSL(), { query: "&instances=4" });
    const ids = r.json().job.map((j: J) => j.id);
    expect(ids).toHaveLength(4);
    expect(new Set(ids).size).toBe(4);
    expect((await post("1.0", XRSL(), { query: "&instances=4" })).json().job).toHaveLength(1);
  });
  it("instances with several descriptions → 403", async () => {
    const r = await post("1.1", `+(${XRSL()})(${XRSL()})`, { query: "&instances=2" });
    expect(r.status).toBe(403);
  });
  it("instances must be a positive integer; instances_min > instances → 400", async () => {
    for (const q of ["&instances=0", "&instances=-1", "&instances=5x", "&instances=", "&instances_min=abc"]) {
      expect((await post("1.1", XRSL(), { query: q })).status).toBe(400);
    }
    expect((await post("1.1", XRSL(), { query: "&instances=2&instances_min=3" })).status).toBe(400);
  });
  it("queue and delegation_id defaults; a value in the description wins", async () => {
    const d = await t.gw.services.delegations.create(t.pki.dn.alice, "x509", { privateKeyPem: "k" });
    const r = await post("1.1", `+(${XRSL("p")})(${XRSL("q", '(queue="main")')})`, { query: `&queue=long&delegation_id=${d}` });
    const [a, b] = r.json().job;
    expect((await t.gw.services.jobs.get(a.id))?.queue).toBe("long");
    expect((await t.gw.services.jobs.get(b.id))?.queue).toBe("main");
    expect((await t.gw.services.jobs.get(a.id))?.mainDelegation).toBe(d);
    const bad = await post("1.1", XRSL(), { query: "&delegation_id=doesnotexist" });
    expect(bad.json().job[0]["status-code"]).toBe("400");
  });
});

describe("limits and draining", () => {
  it("instances beyond the CE job limit: fewer created, or 403 under instances_min", async () => {
    const small = await startTestGateway(inject("redisUrl"), { jobs: { maxTotal: 5 } });
    try {
      const r = await small.request("POST", `${small.rest}/1.1/jobs?action=new&instances=8`, { body: XRSL(), accept: "application/json" });
      expect(r.status).toBe(201);
      expect(r.json().job).toHaveLength(5);
      const full = await small.request("POST", `${small.rest}/1.1/jobs?action=new&instances=2&instances_min=1`, {
        body: XRSL(),
        accept: "application/json",
      });
      expect(full.status).toBe(403);
      const one = await small.request("POST", `${small.rest}/1.0/jobs?action=new`, { body: XRSL(), accept: "application/json" });
      expect(one.json().job[0]["status-code"]).toBe("503");
      const list = await small.request("GET", `${small.rest}/1.0/jobs`, { accept: "application/json" });
      expect(list.json().job).toHaveLength(5);
      // Jobs that did not fit were fully rolled back: no control or session directories remain.
      const { readdirSync } = await import("node:fs");
      const leaves = (dir: string, depth: number): number =>
        depth === 0 ? 1 : readdirSync(dir).reduce((n, d) => n + leaves(`${dir}/${d}`, depth - 1), 0);
      expect(leaves(`${small.config.paths.controlDir}/jobs`, 3)).toBe(5);
      // Dot entries of the session root are the CE's own (`.events`, the batch jobs' doorbells).
      expect(readdirSync(small.config.paths.sessionRoot).filter((n) => !n.startsWith("."))).toHaveLength(5);
    } finally {
      await small.close();
    }
  });
  it("jobs.allowNew false → 503 CE is draining", async () => {
    const drained = await startTestGateway(inject("redisUrl"), { jobs: { allowNew: false } });
    try {
      const r = await drained.request("POST", `${drained.rest}/1.0/jobs?action=new`, { body: XRSL(), accept: "application/json" });
      expect(r.status).toBe(503);
      expect(r.json().reason).toContain("draining");
    } finally {
      await drained.close();
    }
  });
});

void xmlAll;

describe("submission bookkeeping for crash recovery", () => {
  it("ids are marked while their files are written and unmarked after the commit", async () => {
    const { jobs, control } = t.gw.services;
    // Observe the mark when the job's directory path is first taken (before any file is written);
    // the ZSCORE is sent right then, so it is answered before the later unmark on this connection.
    const seen = new Map<string, Promise<string | null>>();
    const jobDir = control.jobDir.bind(control);
    control.jobDir = (id) => {
      if (!seen.has(id)) seen.set(id, jobs.redis.zscore(jobs.keys.creating(), id));
      return jobDir(id);
    };
    let ids: string[] = [];
    try {
      const r = await t.request("POST", `${t.rest}/1.1/jobs?action=new`, {
        body: `+(${XRSL("m1")})(${XRSL("m2")})`,
        accept: "application/json",
      });
      expect(r.status).toBe(201);
      ids = (r.json() as J).job.map((j: J) => j.id);
    } finally {
      control.jobDir = jobDir;
    }
    expect(ids).toHaveLength(2);
    for (const id of ids) expect(Number(await seen.get(id))).toBeGreaterThan(0);
    expect(await jobs.redis.zcard(jobs.keys.creating())).toBe(0);
  });
});

describe("a job waiting for client uploads says which and until when", () => {
  it("info document OtherMessages and diagnose/errors name the files and the deadline", async () => {
    const r = await post(
      "1.1",
      `&(executable="run.sh")(inputfiles=("run.sh" "")("data/in.txt" "")("remote.txt" "https://example.org/x"))`,
      { ct: "application/rsl" },
    );
    expect(r.status).toBe(201);
    const id = r.json().job[0].id as string;
    const info = await t.request("POST", `${t.rest}/1.1/jobs?action=info`, {
      body: JSON.stringify({ job: [{ id }] }),
      accept: "application/json",
      headers: { "content-type": "application/json" },
    });
    const activity = JSON.stringify(info.json());
    const m =
      /Waiting for client uploads: run\.sh, data\/in\.txt; the job fails unless they are all uploaded by (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)/.exec(
        activity,
      );
    expect(m, activity).not.toBeNull();
    // The configured upload timeout from now (give or take the request's own time).
    const until = Date.parse(m![1]!);
    expect(Math.abs(until - (Date.now() + t.config.jobs.uploadTimeoutSeconds * 1000))).toBeLessThan(5_000);
    expect(activity).not.toContain("remote.txt");
    // A job that only waits for uploads is created admitted: its errors log says the same from the start.
    const only = await post("1.1", `&(executable="run.sh")(inputfiles=("run.sh" ""))`, { ct: "application/rsl" });
    const errors = await t.request("GET", `${t.rest}/1.1/jobs/${only.json().job[0].id}/diagnose/errors`);
    expect(errors.text).toMatch(
      /ACCEPTED -> PREPARING.*\n.*Waiting for client uploads: run\.sh; the job fails unless they are all uploaded by \d{4}-/,
    );
  });
});

describe("RTEs that need a credential the job does not bring: per-item 400 naming the RTE and what is missing", () => {
  let g: TestGateway;
  let x509: string;
  let pending: string;
  let jwt: string;
  beforeAll(async () => {
    g = await startTestGateway(inject("redisUrl"), { jobs: { runtimeEnvironments: ["ENV/PROXY"], queues: [{ name: "main" }] } });
    const { paths } = g.gw.services.config;
    // A site RTE that reads the job's proxy declares it in its header; ENV/TOKEN is the CE's own.
    mkdirSync(join(paths.rteDir, "SITE"), { recursive: true });
    writeFileSync(
      join(paths.rteDir, "SITE", "GRID-1.0"),
      '# copies the proxy\n# needs: proxy\ncp "$joboption_controldir/job.$joboption_gridid.proxy" x\n',
    );
    const rte = { paths, jobs: { runtimeEnvironments: [], defaultRuntimeEnvironments: [] } };
    enableRte(rte, "SITE/GRID-1.0");
    enableRte(rte, "ENV/TOKEN");
    const d = g.gw.services.delegations;
    x509 = await d.create(g.pki.dn.alice, "x509", { privateKeyPem: "k" });
    await d.storeProxy(x509, g.pki.dn.alice, "PROXY", Date.now() + 3_600_000, "PUBLIC");
    pending = await d.create(g.pki.dn.alice, "x509", { privateKeyPem: "k" }); // a CSR never answered: no proxy yet
    jwt = await d.create(g.pki.dn.alice, "jwt", { token: "a.b.c" });
  });
  afterAll(async () => g?.close());

  const item = async (rte: string, deleg?: string) =>
    (
      await g.request("POST", `${g.rest}/1.1/jobs?action=new${deleg ? `&delegation_id=${deleg}` : ""}`, {
        body: XRSL("c", `(runtimeenvironment="${rte}")`),
        accept: "application/json",
      })
    ).json().job[0] as J;

  it("ENV/PROXY or a site RTE with `# needs: proxy`: refused with a token delegation, none, or a CSR never answered; accepted with a proxy", async () => {
    for (const rte of ["ENV/PROXY", "SITE/GRID-1.0", "SITE/GRID"]) {
      const tokenOnly = await item(rte, jwt);
      expect(tokenOnly["status-code"]).toBe("400");
      expect(tokenOnly.reason).toBe(
        `Requested runtime environment ${rte} needs an X.509 proxy, but the job has a token delegation only: delegate a proxy and name it in the job (delegation_id), or do not ask for ${rte}`,
      );
      expect(tokenOnly.id).toBeUndefined();
      expect((await item(rte)).reason).toMatch(
        new RegExp(`^Requested runtime environment ${rte} needs an X\\.509 proxy, but the job has no delegation`),
      );
      expect((await item(rte, pending)).reason).toMatch(/an X\.509 delegation without a stored proxy/);
      expect((await item(rte, x509))["status-code"]).toBe("201");
    }
  });

  it("ENV/TOKEN: refused without a token delegation, accepted with one", async () => {
    expect(await item("ENV/TOKEN")).toEqual({
      "status-code": "400",
      reason:
        "Requested runtime environment ENV/TOKEN needs a bearer token, but the job has no delegation: delegate a token (action=new&type=jwt with X-Token-Delegation) and name it in the job (delegation_id), or do not ask for ENV/TOKEN",
    });
    expect((await item("ENV/TOKEN", x509)).reason).toMatch(/needs a bearer token, but the job has an X\.509 delegation only/);
    expect((await item("ENV/TOKEN", jwt))["status-code"]).toBe("201");
  });
});
