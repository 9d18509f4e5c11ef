import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import type { BrowserContext, Page } from "playwright-core";
import { startStack, type Stack } from "../support/stack.js";
import { CHROMIUM, ensureChromium, launchBrowser, type RemoteBrowser } from "./browser-server.js";
import { ceClient } from "./ce-client.js";
import {
  checkHtmlPage,
  expectNoActiveContent,
  expectQuiet,
  follow,
  followFile,
  linksOf,
  screenshot,
  squeezedCells,
  visitHtml,
  watchPage,
  type PageWatch,
} from "./page-checks.js";

/**
 * Every HTML rendering of the REST interface, as a person with a browser sees
 * it — real headless Chromium, the dev PKI's user certificate as TLS client certificate, the CE's
 * certificate verified against the dev CA (no ignoreHTTPSErrors). Screenshots of every page go
 * to tests/artifacts/screenshots/.
 */
const HAVE_CHROMIUM = ensureChromium();
if (!HAVE_CHROMIUM) console.warn(`browser tests skipped: ${CHROMIUM} is absent and scripts/ensure-system-deps.sh browser could not install it`);

const XSS_IMG = "<img src=x onerror=alert(1)>";
const XSS_SCRIPT = "<script>alert(1)</script>";
const ODD_NAME = "a b#c?&d.txt";
const sq = (s: string) => `'${s}'`;

const LISTING_XRSL =
  `&(executable="/bin/sh")(jobname="browse me")(stdout="out.txt")(stderr="err.txt")` +
  `(arguments="-c" "mkdir -p sub/deep; echo inner > sub/inner.txt; echo deep > sub/deep/d.txt; echo hello; echo oops >&2; ` +
  `echo x > ${sq(XSS_IMG)}; echo y > ${sq(ODD_NAME)}")` +
  `(outputfiles=("out.txt" "")("err.txt" "")("sub/" "")("${XSS_IMG}" "")("${ODD_NAME}" ""))`;
const SCRIPT_NAME_XRSL = `&(executable="/bin/echo")(arguments="hi")(jobname="${XSS_SCRIPT}")(stdout="out.txt")(outputfiles=("out.txt" ""))`;
const FAILING_XRSL = `&(executable="/bin/sh")(arguments="-c" "echo bad >&2; exit 3")(jobname="fails")(stderr="err.txt")(outputfiles=("err.txt" ""))`;

describe.skipIf(!HAVE_CHROMIUM)("HTML pages in headless Chromium (client certificate, dev CA trusted)", () => {
  let stack: Stack;
  let remote: RemoteBrowser;
  let context: BrowserContext;
  let page: Page;
  let watch: PageWatch;
  let rest: string;
  const jobs = { listing: "", scriptName: "", failing: "" };

  beforeAll(async () => {
    stack = await startStack({ redisUrl: inject("redisUrl"), redisUsers: inject("redisUsers"), backend: "fork" });
    rest = `${stack.url}/rest`;
    const ce = ceClient(stack.url, stack.pki);
    jobs.listing = await ce.submit(LISTING_XRSL);
    jobs.scriptName = await ce.submit(SCRIPT_NAME_XRSL);
    jobs.failing = await ce.submit(FAILING_XRSL);
    const states = await ce.waitForStates(Object.values(jobs), ["FINISHED", "FAILED", "KILLED", "WIPED"], 90_000);
    expect(states).toEqual({ [jobs.listing]: "FINISHED", [jobs.scriptName]: "FINISHED", [jobs.failing]: "FAILED" });

    remote = await launchBrowser({ caFile: `${stack.pki}/ca/ca.pem` });
    context = await remote.browser.newContext({
      clientCertificates: [{ origin: new URL(stack.url).origin, certPath: `${stack.pki}/user/cert.pem`, keyPath: `${stack.pki}/user/key.pem` }],
      ignoreHTTPSErrors: false,
      acceptDownloads: true,
      viewport: { width: 1100, height: 700 },
    });
    page = await context.newPage();
    watch = watchPage(page);
  }, 180_000);

  afterAll(async () => {
    await context?.close().catch(() => undefined);
    await remote?.close();
    await stack?.stop();
  });

  it("the CE certificate is really verified: a browser that does not trust the dev CA gets no page", async () => {
    const untrusting = await launchBrowser();
    try {
      const ctx = await untrusting.browser.newContext({
        clientCertificates: [{ origin: new URL(stack.url).origin, certPath: `${stack.pki}/user/cert.pem`, keyPath: `${stack.pki}/user/key.pem` }],
        ignoreHTTPSErrors: false,
      });
      const p = await ctx.newPage();
      const r = await p.goto(`${rest}/1.1/info`);
      expect(r?.status()).toBe(503);
      expect(await p.textContent("body")).toMatch(/client-certificate error: .*(verify|certificate)/i);
    } finally {
      await untrusting.close();
    }
  }, 60_000);

  it("/rest lists the supported versions", async () => {
    await visitHtml(page, rest, "versions");
    expect(await page.title()).toBe("Supported REST versions");
    const cells = await page.locator("td").allTextContents();
    expect(cells).toEqual(["1.0", "1.1"]);
    expectQuiet(watch);
  });

  it("/rest/1.1/info is the GLUE2 document with the endpoint URL and the arcrest interface", async () => {
    await visitHtml(page, `${rest}/1.1/info`, "info");
    const text = (await page.textContent("body")) ?? "";
    expect(text).toContain(stack.url);
    expect(text).toContain("org.nordugrid.arcrest");
    expect(await page.locator("th", { hasText: /^InterfaceName$/ }).count()).toBeGreaterThan(0);
    expectQuiet(watch);
  });

  it("/rest/1.1/jobs links every job id to its session directory", async () => {
    const { links } = await visitHtml(page, `${rest}/1.1/jobs`, "jobs");
    for (const id of Object.values(jobs)) {
      const link = links.find((l) => l.text === id);
      expect(link, `job ${id} is a link`).toBeDefined();
      expect(new URL(link!.href).pathname).toBe(`${new URL(rest).pathname}/1.1/jobs/${id}/session/`);
    }
    expectQuiet(watch);
  });

  it("the state-filtered job list shows states and keeps the links", async () => {
    const { links } = await visitHtml(page, `${rest}/1.1/jobs?state=FINISHED,FAILED`, "jobs-filtered");
    expect(links.map((l) => l.text).sort()).toEqual(Object.values(jobs).sort());
    const text = (await page.textContent("body")) ?? "";
    expect(text).toContain("FINISHED");
    expect(text).toContain("FAILED");
    expectQuiet(watch);
  });

  it("job id → session directory → subdirectories → files, by following links", async () => {
    await visitHtml(page, `${rest}/1.1/jobs`, "jobs");
    const root = await checkHtmlPage(page, await follow(page, jobs.listing), "session-root");
    expect(new URL(page.url()).pathname).toBe(`${new URL(rest).pathname}/1.1/jobs/${jobs.listing}/session/`);
    expect(root.links.map((l) => l.text).sort()).toEqual([XSS_IMG, ODD_NAME, "err.txt", "out.txt", "sub"].sort());
    // Names are shown as text, never markup; sizes are shown.
    expect(await page.getByRole("link", { name: XSS_IMG, exact: true }).count()).toBe(1);
    expect((await page.textContent("body")) ?? "").toContain("size=6");

    const out = await followFile(page, "out.txt");
    expect(out.content).toBe("hello\n");
    expect((await followFile(page, "err.txt")).content).toBe("oops\n");
    expect((await followFile(page, ODD_NAME)).content).toBe("y\n");
    expect((await followFile(page, XSS_IMG)).content).toBe("x\n");
    await expectNoActiveContent(page);

    const sub = await checkHtmlPage(page, await follow(page, "sub"), "session-sub");
    expect(new URL(page.url()).pathname).toMatch(/\/session\/sub\/$/);
    expect(sub.links.map((l) => l.text).sort()).toEqual(["deep", "inner.txt"]);
    expect((await followFile(page, "inner.txt")).content).toBe("inner\n");

    const deep = await checkHtmlPage(page, await follow(page, "deep"), "session-sub-deep");
    expect(deep.links.map((l) => l.text)).toEqual(["d.txt"]);
    expect((await followFile(page, "d.txt")).content).toBe("deep\n");
    expectQuiet(watch);
  }, 90_000);

  it("diagnose files are shown as text: errors of a finished job, failed of a failed one", async () => {
    const r = await page.goto(`${rest}/1.1/jobs/${jobs.listing}/diagnose/errors`);
    expect(r?.status()).toBe(200);
    expect(r?.headers()["content-type"]).toMatch(/^text\/plain/);
    const text = (await page.textContent("body")) ?? "";
    expect(text).toMatch(/Job state change .* -> FINISHED/);
    await screenshot(page, "diagnose-errors");

    const f = await page.goto(`${rest}/1.1/jobs/${jobs.failing}/diagnose/failed`);
    expect(f?.status()).toBe(200);
    expect((await page.textContent("body")) ?? "").toMatch(/\S/);
    await screenshot(page, "diagnose-failed");
    expectQuiet(watch);
  });

  it("an unknown job's session is a 404 HTML page with the reason", async () => {
    await visitHtml(page, `${rest}/1.1/jobs/${randomUUID()}/session/`, "error-404-unknown-job", 404);
    expect(await page.locator("h1").textContent()).toBe("404 Job not found");
    const reason = page.locator("tr", { has: page.locator("th", { hasText: /^reason$/ }) }).locator("td");
    expect(await reason.textContent()).toBe("Job not found");

    await visitHtml(page, `${rest}/1.1/jobs/${jobs.listing}/session/no-such-file`, "error-404-missing-file", 404);
    expect(await page.locator("h1").textContent()).toMatch(/^404 /);
    expectQuiet(watch);
  });

  it("user-controlled text is escaped: a reflected error reason", async () => {
    const { response } = await visitHtml(page, `${rest}/1.1/jobs?state=${encodeURIComponent(XSS_SCRIPT)}`, "error-400-escaped", 400);
    expect(await page.locator("h1").textContent()).toContain(XSS_SCRIPT);
    const reason = page.locator("tr", { has: page.locator("th", { hasText: /^reason$/ }) }).locator("td");
    expect(await reason.textContent()).toContain(`"${XSS_SCRIPT}"`);
    expect(await response.text()).toContain("&lt;script&gt;alert(1)&lt;/script&gt;");
    expectQuiet(watch);
  });

  it("user-controlled text is escaped: a job named <script>alert(1)</script>", async () => {
    // Job names appear in no HTML rendering (the list shows ids); they do in the diagnose files.
    for (const type of ["local", "description"]) {
      const r = await page.goto(`${rest}/1.1/jobs/${jobs.scriptName}/diagnose/${type}`);
      expect(r?.status()).toBe(200);
      expect(r?.headers()["content-type"]).toMatch(/^text\/plain/);
      expect((await page.textContent("body")) ?? "").toContain(XSS_SCRIPT);
      await expectNoActiveContent(page);
      await screenshot(page, `diagnose-${type}-script-jobname`);
    }
    // And its own pages stay plain.
    await visitHtml(page, `${rest}/1.1/jobs/${jobs.scriptName}/session/`, "session-script-jobname");
    expect((await linksOf(page)).map((l) => l.text)).toEqual(["out.txt"]);
    expectQuiet(watch);
  });

  it("every HTML page is readable in a 1100px window: no value squeezed into a sliver", async () => {
    const pages = [
      rest,
      `${rest}/1.1/info`,
      `${rest}/1.1/jobs`,
      `${rest}/1.1/jobs?state=FINISHED`,
      `${rest}/1.1/jobs/${jobs.listing}/session/`,
      `${rest}/1.1/jobs/${jobs.listing}/session/sub/`,
      `${rest}/1.1/jobs/${randomUUID()}/session/`,
    ];
    const bad: string[] = [];
    for (const url of pages) {
      await page.goto(url);
      for (const cell of await squeezedCells(page)) bad.push(`${new URL(url).pathname}: ${cell}`);
    }
    // Today's cause (packages/glue2/src/render/html.ts STYLE): `th{white-space:nowrap}` also
    // holds the attribute line (.attrs) on one line, and `td{word-break:break-all}` lets nested
    // value cells collapse to a character or two.
    expect(bad, "value cells too narrow to read").toEqual([]);
  });
});
