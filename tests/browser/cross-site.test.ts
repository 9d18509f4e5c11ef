import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import type { BrowserContext, Page } from "playwright-core";
import { startStack, type Stack } from "@ce/testing/stack";
import { stackClient } from "@ce/testing/stack-client";
import { CHROMIUM, ensureChromium, launchBrowser, type RemoteBrowser } from "./browser-server.js";
import { ceClient, type CeClient } from "./ce-client.js";

/**
 * Cross-site request forgery against a whole CE (issue 33; docs/security.md "Cross-site requests"),
 * as it was reproduced: a user whose browser holds their certificate (the pages invite them to
 * import it) opens another site's page, and that page auto-submits forms to the CE — text/plain
 * (which can carry an xRSL description or a JSON id list verbatim), urlencoded, from a sandboxed
 * page (`Origin: null`). Real headless Chromium, the user's certificate as TLS client
 * certificate; then the same posts with curl and that certificate. None may create a job, kill
 * one or create a delegation; the CE's own Kill button and the programs' requests still work.
 */
const HAVE_CHROMIUM = ensureChromium();
if (!HAVE_CHROMIUM) console.warn(`cross-site browser test skipped: ${CHROMIUM} is absent and could not be installed`);

const SLEEPER = `&(executable="/bin/sleep")(arguments="600")(jobname="victim")`;
const ACTIVE = ["ACCEPTING", "ACCEPTED", "PREPARING", "PREPARED", "SUBMITTING", "QUEUING", "RUNNING"];

/** An HTML attribute value between double quotes. */
const attr = (s: string) => s.replace(/&/g, "&amp;").replace(/"/g, "&quot;").replace(/</g, "&lt;");

interface Attack {
  name: string;
  /** Path under `<endpoint>/rest/1.1`, query included. */
  target: string;
  enctype: "text/plain" | "application/x-www-form-urlencoded";
  /** One form field; a text/plain form sends `name=value` verbatim. */
  field: [string, string];
  /** Post from a sandboxed page (its origin opaque): the browser sends `Origin: null`. */
  sandboxed?: boolean;
}

describe.skipIf(!HAVE_CHROMIUM)("cross-site posts with the user's certificate (headless Chromium, curl)", () => {
  let stack: Stack;
  let ce: CeClient;
  let remote: RemoteBrowser;
  let context: BrowserContext;
  let page: Page;
  let evil: Server;
  let evilOrigin: string;
  let victim: string;
  const pages = new Map<string, { html: string; sandboxed: boolean }>();

  const jobIds = async () =>
    (JSON.parse((await ce.call("GET", "/rest/1.1/jobs")).body) as { job: { id: string }[] }).job.map((j) => j.id).sort();
  const delegationIds = async () =>
    (JSON.parse((await ce.call("GET", "/rest/1.1/delegations")).body) as { delegation: { id: string }[] }).delegation
      .map((d) => d.id)
      .sort();
  const stateOf = async (id: string) => (await ce.waitForStates([id], [...ACTIVE, "KILLING", "KILLED", "FINISHED", "FAILED"]))[id];

  beforeAll(async () => {
    stack = await startStack({ redisUrl: inject("redisUrl"), redisUsers: inject("redisUsers"), backend: "fork" });
    ce = ceClient(stack.url, stack.pki);
    victim = await ce.submit(SLEEPER);
    await ce.waitForStates([victim], ["RUNNING"], 60_000);

    // The other site: plain HTTP on another loopback name, one page per attack.
    evil = createServer((req, res) => {
      const p = pages.get(req.url ?? "");
      // A sandboxed document has an opaque origin, as one in a sandboxed frame or at a data: URL.
      const sandbox = p?.sandboxed ? { "content-security-policy": "sandbox allow-forms allow-scripts" } : {};
      res.writeHead(p ? 200 : 404, { "content-type": "text/html; charset=utf-8", ...sandbox }).end(p?.html ?? "");
    });
    await new Promise<void>((r) => evil.listen(0, "127.0.0.1", r));
    evilOrigin = `http://127.0.0.1:${(evil.address() as AddressInfo).port}`;

    remote = await launchBrowser({ caFile: `${stack.pki}/ca/ca.pem` });
    context = await remote.browser.newContext({
      clientCertificates: [
        { origin: new URL(stack.url).origin, certPath: `${stack.pki}/user/cert.pem`, keyPath: `${stack.pki}/user/key.pem` },
      ],
      ignoreHTTPSErrors: false,
    });
    page = await context.newPage();
  }, 180_000);

  afterAll(async () => {
    await context?.close().catch(() => undefined);
    await remote?.close();
    await new Promise((r) => (evil ? evil.close(r) : r(undefined)));
    await stack?.stop();
  });

  /** Opens the other site's page; its form posts itself to the CE. The CE's answer and what Chromium sent. */
  async function launch(a: Attack): Promise<{ status: number; code: string | undefined; sent: Record<string, string> }> {
    const action = `${stack.url}/rest/1.1${a.target}`;
    const form =
      `<form id="f" method="POST" action="${attr(action)}" enctype="${a.enctype}">` +
      `<input type="hidden" name="${attr(a.field[0])}" value="${attr(a.field[1])}"></form>` +
      `<script>document.getElementById("f").submit()</script>`;
    const path = `/${pages.size}`;
    pages.set(path, { html: `<!doctype html>${form}`, sandboxed: a.sandboxed === true });
    const [answer] = await Promise.all([
      page
        .waitForResponse((r) => r.request().method() === "POST" && r.url().startsWith(stack.url), { timeout: 30_000 })
        .catch((e: unknown) => {
          throw new Error(`${a.name}: no answer from the CE to the form post`, { cause: e });
        }),
      page.goto(`${evilOrigin}${path}`),
    ]);
    return { status: answer.status(), code: (await answer.allHeaders())["x-error-code"], sent: await answer.request().allHeaders() };
  }

  const ATTACKS = (): Attack[] => [
    // text/plain sends `name=value`: the description arrives whole, first character `&`.
    {
      name: "submit, text/plain xRSL",
      target: "/jobs?action=new",
      enctype: "text/plain",
      field: ['&(executable="/bin/echo")(arguments', '"pwned")(jobname="csrf")'],
    },
    {
      name: "kill, text/plain JSON id list",
      target: "/jobs?action=kill",
      enctype: "text/plain",
      field: [`{"job":[{"id":"${victim}"}],"x":"`, '"}'],
    },
    { name: "delegation, text/plain", target: "/delegations?action=new", enctype: "text/plain", field: ["a", "b"] },
    { name: "delegation, urlencoded", target: "/delegations?action=new", enctype: "application/x-www-form-urlencoded", field: ["a", "b"] },
    {
      name: "kill, urlencoded",
      target: `/jobs?action=kill`,
      enctype: "application/x-www-form-urlencoded",
      field: ["x", `<jobs><job><id>${victim}</id></job></jobs>`],
    },
    {
      name: "delegation, sandboxed page (Origin: null)",
      target: "/delegations?action=new",
      enctype: "text/plain",
      field: ["a", "b"],
      sandboxed: true,
    },
    {
      name: "submit, sandboxed page (Origin: null)",
      target: "/jobs?action=new",
      enctype: "text/plain",
      field: ['&(executable="/bin/echo")(arguments', '"pwned")'],
      sandboxed: true,
    },
  ];

  it("Chromium: another site's forms create no job, kill nothing, create no delegation (403 CROSS_SITE_REFUSED)", async () => {
    const jobs = await jobIds();
    const delegations = await delegationIds();
    for (const a of ATTACKS()) {
      const r = await launch(a);
      expect(r.status, a.name).toBe(403);
      expect(r.code, a.name).toBe("CROSS_SITE_REFUSED");
      // What the browser said where the post came from.
      expect(r.sent["sec-fetch-site"], a.name).toBe("cross-site");
      expect(r.sent.origin, a.name).toBe(a.sandboxed ? "null" : evilOrigin);
    }
    expect(await jobIds()).toEqual(jobs);
    expect(await delegationIds()).toEqual(delegations);
    expect(ACTIVE).toContain(await stateOf(victim));
  }, 120_000);

  it("curl with the user's certificate: a foreign Origin is 403, a form type is 415; nothing happens", async () => {
    const c = stackClient(stack, { cert: join(stack.pki, "user", "cert.pem"), key: join(stack.pki, "user", "key.pem") });
    const jobs = await jobIds();
    const delegations = await delegationIds();
    const post = (query: string, headers: string[], body: string) =>
      c.curl(
        ["-X", "POST", ...headers.flatMap((h) => ["-H", h]), "-H", "Accept: application/json", "--data-binary", "@-", `${c.api}/${query}`],
        body,
      );
    const xrsl = `&(executable="/bin/echo")(arguments="pwned")`;
    const killList = `{"job":[{"id":"${victim}"}],"x":"="}`;
    for (const [what, headers, expected] of [
      ["foreign Origin", ["Origin: https://evil.example", "Content-Type: text/plain"], 403],
      ["Origin: null", ["Origin: null", "Content-Type: text/plain"], 403],
      ["Sec-Fetch-Site: cross-site", ["Sec-Fetch-Site: cross-site", "Content-Type: text/plain"], 403],
      ["text/plain, no Origin (an old browser)", ["Content-Type: text/plain"], 415],
      ["urlencoded, no Origin (curl -d)", ["Content-Type: application/x-www-form-urlencoded"], 415],
    ] as const) {
      expect(post("jobs?action=new", [...headers], xrsl).status, `submit: ${what}`).toBe(expected);
      expect(post("jobs?action=kill", [...headers], killList).status, `kill: ${what}`).toBe(expected);
      expect(post("delegations?action=new", [...headers], "a=b").status, `delegation: ${what}`).toBe(expected);
    }
    expect(await jobIds()).toEqual(jobs);
    expect(await delegationIds()).toEqual(delegations);
    expect(ACTIVE).toContain(await stateOf(victim));
    // The same requests as a program sends them (the README's curl) are unchanged.
    const created = c.submit(`&(executable="/bin/echo")(arguments="hi")(jobname="program")`);
    expect(created.status).toBe(201);
    expect(created.id).toBeDefined();
    expect(c.curl(["-X", "POST", `${c.api}/delegations?action=new`]).status).toBe(201);
  }, 120_000);

  it("the CE's own Kill button still works (Chromium on the job page: same-origin)", async () => {
    await page.goto(`${stack.url}/rest/1.1/jobs/${victim}`);
    const [answer] = await Promise.all([
      page.waitForResponse((r) => r.request().method() === "POST"),
      page.getByRole("button", { name: "Kill" }).click(),
    ]);
    const sent = await answer.request().allHeaders();
    expect(sent["sec-fetch-site"]).toBe("same-origin");
    expect(sent.origin).toBe(new URL(stack.url).origin);
    expect(answer.status()).toBe(202);
    expect(await ce.waitForStates([victim], ["KILLED"], 60_000)).toEqual({ [victim]: "KILLED" });
  }, 120_000);
});
