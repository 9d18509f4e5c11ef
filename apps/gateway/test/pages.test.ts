import { afterAll, beforeAll, describe, expect, it, inject } from "vitest";
import { startTestGateway, XRSL, type TestGateway } from "./harness.js";

/**
 * The pages for people (src/pages) as HTTP sees them: which requests get a page, that programs
 * (JSON, XML) get exactly the answers they got before, and the same-origin rule of the job
 * page's buttons. The browser walk is tests/browser/html-pages.test.ts.
 */
let t: TestGateway;
let id: string;
let other: string;
const FORM = "application/x-www-form-urlencoded";

beforeAll(async () => {
  t = await startTestGateway(inject("redisUrl"));
  const submit = async (name: string) =>
    (await t.request("POST", `${t.rest}/1.1/jobs?action=new`, { body: XRSL(name), accept: "application/json" })).json().job[0].id as string;
  id = await submit("page <b>one</b>");
  other = await submit("second");
});
afterAll(async () => t?.close());

describe("programs get the interface's answers where people get pages", () => {
  const cases = () =>
    [
      [`${t.rest}/1.1/jobs/${id}`, "MISSING_SUBRESOURCE"],
      [`${t.rest}/1.1/jobs/${id}/diagnose`, "DIAGNOSE_ITEM_NOT_FOUND"],
      [`${t.rest}/1.1`, undefined],
    ] as const;
  it.each(["application/json", "application/xml"])("%s: the 404s stay, byte for byte", async (accept) => {
    for (const [path, code] of cases()) {
      const r = await t.request("GET", path, { accept });
      expect(r.status, path).toBe(404);
      if (code) expect(r.headers["x-error-code"], path).toBe(code);
      expect(r.headers["content-type"]).toBe(accept);
    }
    const json = await t.request("GET", `${t.rest}/1.1/jobs/${id}`, { accept: "application/json" });
    expect(json.text).toBe(
      '{"status-code":"404","reason":"Missing job sub-resource: use /jobs/<id>/session or /jobs/<id>/diagnose/<file>"}',
    );
    const root = await t.request("GET", t.rest.replace(/\/rest$/, ""), { accept: "application/json" });
    expect(root.status).toBe(404);
  });

  it("a form-typed POST from a program (JSON) is still the 404 of /jobs/<id>", async () => {
    const r = await t.request("POST", `${t.rest}/1.1/jobs/${id}`, {
      accept: "application/json",
      body: "action=kill",
      headers: { "content-type": FORM, origin: t.config.origin },
    });
    expect(r.status).toBe(404);
    expect(r.headers["x-error-code"]).toBe("MISSING_SUBRESOURCE");
  });

  it("HTML (or no Accept): landing, job page, diagnose index; the endpoint redirects to the landing page", async () => {
    const landing = await t.request("GET", `${t.rest}/1.1`);
    expect(landing.status).toBe(200);
    expect(landing.text).toContain(`href="${t.rest}/1.1/jobs"`);
    const job = await t.request("GET", `${t.rest}/1.1/jobs/${id}`, { accept: "text/html" });
    expect(job.status).toBe(200);
    // The job name is text, never markup.
    expect(job.text).toContain("Job page &lt;b&gt;one&lt;/b&gt;");
    expect(job.text).toContain(`action="${t.rest}/1.1/jobs/${id}"`);
    const diag = await t.request("GET", `${t.rest}/1.1/jobs/${id}/diagnose`);
    expect(diag.status).toBe(200);
    expect(diag.text).toContain(`href="${t.rest}/1.1/jobs/${id}/diagnose/description"`);
    const root = await t.request("GET", t.rest.replace(/\/rest$/, ""));
    expect(root.status).toBe(302);
    expect(root.headers.location).toBe(`${t.rest}/1.1`);
    // Another owner's job is not found, as everywhere.
    expect((await t.request("GET", `${t.rest}/1.1/jobs/${id}`, { as: "bob" })).status).toBe(404);
  });

  it("the job table sorts on the server and refuses an unknown sort naming it", async () => {
    const byName = await t.request("GET", `${t.rest}/1.1/jobs?sort=name&order=desc`);
    expect(byName.status).toBe(200);
    expect(byName.text.indexOf("second")).toBeLessThan(byName.text.indexOf("page &lt;b&gt;one"));
    const asc = await t.request("GET", `${t.rest}/1.1/jobs?sort=name&order=asc`);
    expect(asc.text.indexOf("second")).toBeGreaterThan(asc.text.indexOf("page &lt;b&gt;one"));
    const bad = await t.request("GET", `${t.rest}/1.1/jobs?sort=size`);
    expect(bad.status).toBe(400);
    expect(bad.headers["x-error-code"]).toBe("BAD_SORT");
    expect(bad.text).toContain("&quot;size&quot;");
    // JSON ignores the page's parameters, as it ignores any unknown one.
    const json = await t.request("GET", `${t.rest}/1.1/jobs?sort=size`, { accept: "application/json" });
    expect(json.status).toBe(200);
  });
});

describe("the job page's buttons post only from the CE's own pages", () => {
  const post = (headers: Record<string, string>, body = "action=kill", as?: "bob") =>
    t.request("POST", `${t.rest}/1.1/jobs/${other}`, {
      accept: "text/html",
      body,
      headers: { "content-type": FORM, ...headers },
      ...(as ? { as } : {}),
    });

  it("refuses another site's form (Origin or Sec-Fetch-Site), and a post that says neither", async () => {
    const variants: Record<string, string>[] = [
      { origin: "https://evil.example" },
      { "sec-fetch-site": "cross-site", origin: t.config.origin },
      { "sec-fetch-site": "same-site" },
      {},
    ];
    for (const headers of variants) {
      const r = await post(headers);
      expect(r.status, JSON.stringify(headers)).toBe(403);
      expect(r.headers["x-error-code"]).toBe("CROSS_SITE_REFUSED");
    }
    const rec = await t.gw.services.jobs.get(other);
    expect(rec?.killRequested).toBeFalsy();
  });

  it("accepts the same origin: 202 page, the kill on the record; unknown actions and other owners refused", async () => {
    expect((await post({ origin: t.config.origin }, "action=explode")).status).toBe(400);
    expect((await post({ origin: t.config.origin, "sec-fetch-site": "same-origin" }, "action=kill", "bob")).status).toBe(404);
    const r = await post({ origin: t.config.origin, "sec-fetch-site": "same-origin" });
    expect(r.status).toBe(202);
    // Words for a person, on to the job page: no HTTP code or phrase, no id as the job's name.
    expect(r.text).toContain("Kill requested");
    expect(r.text).not.toMatch(/202|Queued for killing/);
    expect(r.text).toContain(`<meta http-equiv="refresh" content="0; url=${t.rest}/1.1/jobs/${other}?done=kill"/>`);
    expect(r.text).toContain(`<a href="${t.rest}/1.1/jobs/${other}">second</a>`);
    expect((await t.gw.services.jobs.get(other))?.killRequested).toBe(true);
  });
});

describe("Clean and the list's bulk actions ask first; the confirmation's button does it", () => {
  const SAME = { "sec-fetch-site": "same-origin" };
  const post = (path: string, body: string) =>
    t.request("POST", `${t.rest}/1.1/${path}`, {
      accept: "text/html",
      body,
      headers: { "content-type": FORM, ...SAME, origin: t.config.origin },
    });
  let victim: string;
  let hostile: string;
  beforeAll(async () => {
    const submit = async (name: string) =>
      (await t.request("POST", `${t.rest}/1.1/jobs?action=new`, { body: XRSL(name), accept: "application/json" })).json().job[0]
        .id as string;
    victim = await submit("to clean");
    hostile = await submit("<img src=x onerror=alert(1)>");
  });

  it("one click on Clean only asks: the job stays until the confirmation is posted", async () => {
    const ask = await post(`jobs/${victim}`, "action=clean");
    expect(ask.status).toBe(200);
    expect(ask.text).toContain("Remove the job to clean and its files?");
    expect(ask.text).toContain('<input type="hidden" name="confirm" value="yes"/>');
    expect(ask.text).toContain(`<a href="${t.rest}/1.1/jobs/${victim}">No, keep it</a>`);
    expect((await t.gw.services.jobs.get(victim))?.cleanRequested).toBeFalsy();
    const done = await post(`jobs/${victim}`, "action=clean&confirm=yes");
    expect(done.status).toBe(202);
    expect(done.text).toContain(`url=${t.rest}/1.1/jobs?done=clean`);
    expect((await t.gw.services.jobs.get(victim))?.cleanRequested).toBe(true);
  });

  it("bulk kill of the selected rows: a confirmation naming them (escaped), then the kill; programs keep the 400", async () => {
    const ask = await post("jobs", `action=kill&id=${hostile}&id=${id}&id=not-a-job`);
    expect(ask.status).toBe(200);
    expect(ask.text).toContain("Kill 2 jobs?");
    expect(ask.text).toContain("&lt;img src=x onerror=alert(1)&gt;");
    expect(ask.text).not.toContain("<img");
    expect(ask.text).toContain(`<input type="hidden" name="id" value="${hostile}"/>`);
    expect((await t.gw.services.jobs.get(hostile))?.killRequested).toBeFalsy();
    const done = await post("jobs", `action=kill&confirm=yes&id=${hostile}&id=${id}`);
    expect(done.status).toBe(202);
    expect(done.text).toContain("Kill requested for the selected jobs.");
    expect((await t.gw.services.jobs.get(hostile))?.killRequested).toBe(true);
    // Another owner's ids select nothing.
    const bob = await t.request("POST", `${t.rest}/1.1/jobs`, {
      as: "bob",
      accept: "text/html",
      body: `action=clean&confirm=yes&id=${hostile}`,
      headers: { "content-type": FORM, origin: t.config.origin },
    });
    expect(bob.status).toBe(400);
    expect((await t.gw.services.jobs.get(hostile))?.cleanRequested).toBeFalsy();
    // Cross-site bulk posts are refused like the job page's.
    const evil = await t.request("POST", `${t.rest}/1.1/jobs`, {
      accept: "text/html",
      body: `action=clean&confirm=yes&id=${hostile}`,
      headers: { "content-type": FORM, origin: "https://evil.example" },
    });
    expect(evil.status).toBe(403);
    const program = await t.request("POST", `${t.rest}/1.1/jobs`, {
      accept: "application/json",
      body: "{}",
      headers: { "content-type": "application/json" },
    });
    expect(program.status).toBe(400);
    expect(program.headers["x-error-code"]).toBe("BAD_ACTION");
  });

  it("the job list: reason column, search by name, refresh controls; ?done= shows only its own notices", async () => {
    const all = await t.request("GET", `${t.rest}/1.1/jobs`);
    expect(all.text).toContain('<th scope="col">Reason</th>');
    expect(all.text).toContain("Kill selected");
    expect(all.text).toContain(`href="${t.rest}/1.1/jobs?refresh=on&amp;sort=submitted&amp;order=desc"`);
    const found = await t.request("GET", `${t.rest}/1.1/jobs?name=CLEAN`);
    expect(found.text).toContain(">to clean</a>");
    expect(found.text).not.toContain(">second</a>");
    const auto = await t.request("GET", `${t.rest}/1.1/jobs?refresh=on`);
    expect(auto.text).toMatch(/<meta http-equiv="refresh" content="30; url=[^"]*refresh=on[^"]*"/);
    expect((await t.request("GET", `${t.rest}/1.1/jobs?refresh=yes`)).status).toBe(400);
    // A job waiting for its client's upload says for what and until when; past the deadline, not any more.
    const waiting = (
      await t.request("POST", `${t.rest}/1.1/jobs?action=new`, {
        body: XRSL("uploader", '(inputfiles=("in.dat" ""))'),
        accept: "application/json",
      })
    ).json().job[0].id as string;
    const rec = (await t.gw.services.jobs.get(waiting))!;
    expect(rec.awaiting).toBe("in.dat");
    const list = await t.request("GET", `${t.rest}/1.1/jobs?name=uploader`);
    const until = new Date(rec.uploadDeadline!)
      .toISOString()
      .replace("T", " ")
      .replace(/\.\d{3}Z$/, "Z");
    expect(list.text).toContain(`waiting for upload of in.dat until ${until}`);
    await t.gw.services.jobs.update(rec, { uploadDeadline: Date.now() - 1000 });
    const late = await t.request("GET", `${t.rest}/1.1/jobs?name=uploader`);
    expect(late.text).not.toContain("waiting for upload");
    expect(late.text).toContain("upload deadline passed: the job fails");
    const odd = await t.request("GET", `${t.rest}/1.1/jobs/${id}?done=constructor`);
    expect(odd.text).not.toContain('class="notice"');
  });
});

describe("a session file from a page's link: as text, or as a download; programs get the interface's bytes", () => {
  it("?view=text is text/plain UTF-8 with nosniff; ?download=1 an attachment; neither is octet-stream as before", async () => {
    const { writeFile } = await import("node:fs/promises");
    await writeFile(`${t.gw.services.control.sessionDir(id)}/out.txt`, "<script>alert(1)</script>\nhello\n");
    const base = `${t.rest}/1.1/jobs/${id}/session/out.txt`;
    const text = await t.request("GET", `${base}?view=text`);
    expect(text.status).toBe(200);
    expect(text.headers["content-type"]).toBe("text/plain; charset=utf-8");
    expect(text.headers["x-content-type-options"]).toBe("nosniff");
    expect(text.headers["content-disposition"]).toBe("inline");
    expect(text.headers["content-security-policy"]).toContain("sandbox");
    expect(text.text).toBe("<script>alert(1)</script>\nhello\n");
    const dl = await t.request("GET", `${base}?download=1`);
    expect(dl.headers["content-type"]).toBe("application/octet-stream");
    expect(dl.headers["content-disposition"]).toBe(`attachment; filename="out.txt"; filename*=UTF-8''out.txt`);
    for (const accept of [undefined, "application/json", "*/*"]) {
      const plain = await t.request("GET", base, accept ? { accept } : {});
      expect(plain.headers["content-type"]).toBe("application/octet-stream");
      expect(plain.headers["content-disposition"]).toBeUndefined();
    }
    expect((await t.request("GET", `${base}?view=html`)).status).toBe(400);
  });
});

describe("download all: the job's session files as one tar from the job page's link", () => {
  it("the job page links it; the archive is application/x-tar, an attachment, nosniff; symlinks stay out; programs are unchanged", async () => {
    const { mkdirSync, symlinkSync, writeFileSync, mkdtempSync } = await import("node:fs");
    const { execFileSync } = await import("node:child_process");
    const { join } = await import("node:path");
    const { tmpdir } = await import("node:os");
    const root = t.gw.services.control.sessionDir(other);
    writeFileSync(`${root}/result.txt`, "42\n");
    mkdirSync(`${root}/logs`, { recursive: true });
    writeFileSync(`${root}/logs/run.log`, "ran\n");
    symlinkSync("/etc/passwd", `${root}/passwd`);
    const page = await t.request("GET", `${t.rest}/1.1/jobs/${other}`);
    const href = `${t.rest}/1.1/jobs/${other}/session/?download=tar`;
    expect(page.text).toContain(`href="${href}"`);
    const r = await t.request("GET", href);
    expect(r.status).toBe(200);
    expect(r.headers["content-type"]).toBe("application/x-tar");
    expect(r.headers["content-disposition"]).toBe(`attachment; filename="${other}.tar"`);
    expect(r.headers["x-content-type-options"]).toBe("nosniff");
    expect(Number(r.headers["content-length"])).toBe(r.body.length);
    const dir = mkdtempSync(join(tmpdir(), "ce-pages-tar-"));
    writeFileSync(join(dir, "a.tar"), r.body);
    const list = execFileSync("tar", ["-tf", join(dir, "a.tar")], { encoding: "utf8" })
      .trim()
      .split("\n");
    expect(list).toContain(`${other}/result.txt`);
    expect(list).toContain(`${other}/logs/run.log`);
    expect(list.some((n) => n.includes("passwd"))).toBe(false);
    // The listing page of a subdirectory links its own archive; a file cannot be archived.
    const listing = await t.request("GET", `${t.rest}/1.1/jobs/${other}/session/logs/`);
    expect(listing.text).toContain(`href="${t.rest}/1.1/jobs/${other}/session/logs/?download=tar"`);
    const onFile = await t.request("GET", `${t.rest}/1.1/jobs/${other}/session/result.txt?download=tar`);
    expect(onFile.status).toBe(400);
    expect(onFile.headers["x-error-code"]).toBe("BAD_ARCHIVE");
    // Another owner's job is not found; a program without the parameter gets the listing as before.
    expect((await t.request("GET", href, { as: "bob" })).status).toBe(404);
    const json = await t.request("GET", `${t.rest}/1.1/jobs/${other}/session/`, { accept: "application/json" });
    expect(json.headers["content-type"]).toContain("application/json");
  });
});
