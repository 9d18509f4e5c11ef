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
    expect(r.text).toContain("Queued for killing");
    expect(r.text).toContain(`href="${t.rest}/1.1/jobs/${other}?done=kill"`);
    expect((await t.gw.services.jobs.get(other))?.killRequested).toBe(true);
  });
});
