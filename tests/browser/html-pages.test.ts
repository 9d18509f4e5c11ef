import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import type { BrowserContext, Page } from "playwright-core";
import { startStack, type Stack } from "@ce/testing/stack";
import { CHROMIUM, ensureChromium, launchBrowser, type RemoteBrowser } from "./browser-server.js";
import { ceClient } from "./ce-client.js";
import {
  checkHtmlPage,
  expectNoActiveContent,
  expectQuiet,
  follow,
  followFile,
  overflowX,
  tabStops,
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
if (!HAVE_CHROMIUM)
  console.warn(`browser tests skipped: ${CHROMIUM} is absent and scripts/ensure-system-deps.sh browser could not install it`);

const XSS_IMG = "<img src=x onerror=alert(1)>";
const XSS_SCRIPT = "<script>alert(1)</script>";
const ODD_NAME = "a b#c?&d.txt";
const sq = (s: string) => `'${s}'`;
/** Names in the session listing's file table, in page order (not the crumbs, not the parent link). */
const fileNames = (page: Page) => page.locator("tbody td.mono a").allTextContents();
/** Job names (link texts of the first column) in the job table, in page order. */
const jobNames = (page: Page) => page.locator("tbody tr td:first-child > a").allTextContents();

const LISTING_XRSL =
  `&(executable="/bin/sh")(jobname="browse me")(stdout="out.txt")(stderr="err.txt")` +
  `(arguments="-c" "mkdir -p sub/deep; echo inner > sub/inner.txt; echo deep > sub/deep/d.txt; echo hello; echo oops >&2; ` +
  `echo x > ${sq(XSS_IMG)}; echo y > ${sq(ODD_NAME)}")` +
  `(outputfiles=("out.txt" "")("err.txt" "")("sub/" "")("${XSS_IMG}" "")("${ODD_NAME}" ""))`;
const SCRIPT_NAME_XRSL = `&(executable="/bin/echo")(arguments="hi")(jobname="${XSS_SCRIPT}")(stdout="out.txt")(outputfiles=("out.txt" ""))`;
const FAILING_XRSL = `&(executable="/bin/sh")(arguments="-c" "echo bad >&2; exit 3")(jobname="fails")(rerun="1")(stderr="err.txt")(outputfiles=("err.txt" ""))`;

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
      clientCertificates: [
        { origin: new URL(stack.url).origin, certPath: `${stack.pki}/user/cert.pem`, keyPath: `${stack.pki}/user/key.pem` },
      ],
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
        clientCertificates: [
          { origin: new URL(stack.url).origin, certPath: `${stack.pki}/user/cert.pem`, keyPath: `${stack.pki}/user/key.pem` },
        ],
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
    expect(await page.locator("dt", { hasText: /^InterfaceName$/ }).count()).toBeGreaterThan(0);
    expectQuiet(watch);
  });

  it("/rest/1.1/jobs is a table: name → job page, state, owner, times, exit code, files → session directory", async () => {
    const { links } = await visitHtml(page, `${rest}/1.1/jobs`, "jobs");
    const jobsPath = `${new URL(rest).pathname}/1.1/jobs`;
    for (const [id, name] of [
      [jobs.listing, "browse me"],
      [jobs.failing, "fails"],
      [jobs.scriptName, XSS_SCRIPT],
    ] as const) {
      expect(new URL(links.find((l) => l.text === name)!.href).pathname, name).toBe(`${jobsPath}/${id}`);
      expect(
        links.some((l) => new URL(l.href).pathname === `${jobsPath}/${id}/session/`),
        `files of ${name}`,
      ).toBe(true);
    }
    expect(await page.locator("thead th").allTextContents()).toEqual([
      "Name",
      "State",
      "Owner",
      "Submitted ▼",
      "Last change",
      "Exit code",
      "Files",
    ]);
    const failing = page.locator("tr", { has: page.getByRole("link", { name: "fails", exact: true }) });
    expect(await failing.locator("td").nth(1).textContent()).toBe("FAILED");
    expect(await failing.locator("td").nth(5).textContent()).toBe("3");
    expectQuiet(watch);
  });

  it("the job table filters by state and sorts by column, by clicking", async () => {
    await visitHtml(page, `${rest}/1.1/jobs`, "jobs");
    await checkHtmlPage(page, await follow(page, "FAILED (1)"), "jobs-failed");
    expect(await jobNames(page)).toEqual(["fails"]);
    await checkHtmlPage(page, await follow(page, "All (3)"), "jobs-all");
    await checkHtmlPage(page, await follow(page, "Name"), "jobs-by-name");
    expect(await jobNames(page)).toEqual([XSS_SCRIPT, "browse me", "fails"]);
    await checkHtmlPage(page, await follow(page, "Name ▲"), "jobs-by-name-desc");
    expect(await jobNames(page)).toEqual(["fails", "browse me", XSS_SCRIPT]);
    expectQuiet(watch);
  });

  it("job → session directory → subdirectories → files, by following links", async () => {
    await visitHtml(page, `${rest}/1.1/jobs/${jobs.listing}`, "job-listing");
    await checkHtmlPage(page, await follow(page, "Session files"), "session-root");
    expect(new URL(page.url()).pathname).toBe(`${new URL(rest).pathname}/1.1/jobs/${jobs.listing}/session/`);
    expect(await fileNames(page)).toEqual(["sub", XSS_IMG, ODD_NAME, "err.txt", "out.txt"]);
    // Names are shown as text, never markup; sizes are shown.
    expect(await page.getByRole("link", { name: XSS_IMG, exact: true }).count()).toBe(1);
    expect(
      await page
        .locator("tr", { has: page.getByRole("link", { name: "out.txt", exact: true }) })
        .locator("td")
        .nth(1)
        .textContent(),
    ).toBe("6 B");

    const out = await followFile(page, "out.txt");
    expect(out.content).toBe("hello\n");
    expect((await followFile(page, "err.txt")).content).toBe("oops\n");
    expect((await followFile(page, ODD_NAME)).content).toBe("y\n");
    expect((await followFile(page, XSS_IMG)).content).toBe("x\n");
    await expectNoActiveContent(page);

    await checkHtmlPage(page, await follow(page, "sub"), "session-sub");
    expect(new URL(page.url()).pathname).toMatch(/\/session\/sub\/$/);
    expect(await fileNames(page)).toEqual(["deep", "inner.txt"]);
    expect((await followFile(page, "inner.txt")).content).toBe("inner\n");

    await checkHtmlPage(page, await follow(page, "deep"), "session-sub-deep");
    expect(await fileNames(page)).toEqual(["d.txt"]);
    expect((await followFile(page, "d.txt")).content).toBe("deep\n");
    // Breadcrumbs and the parent link lead back up.
    expect(await page.locator("nav.crumbs li").allTextContents()).toEqual([
      new URL(stack.url).hostname,
      "Jobs",
      "browse me",
      "session",
      "sub",
      "deep",
    ]);
    await checkHtmlPage(page, await follow(page, ".. (parent directory)"), "session-sub-again");
    expect(new URL(page.url()).pathname).toMatch(/\/session\/sub\/$/);
    await checkHtmlPage(page, await follow(page, "session"), "session-root-again");
    expect(await fileNames(page)).toContain("out.txt");
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
    // The job page and the list show the name as text.
    await visitHtml(page, `${rest}/1.1/jobs/${jobs.scriptName}`, "job-script-jobname");
    expect(await page.locator("h1").textContent()).toBe(`Job ${XSS_SCRIPT}`);
    await expectNoActiveContent(page);
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
    expect(await fileNames(page)).toEqual(["out.txt"]);
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
  it("from the endpoint URL to a job, its files and its diagnose files, by clicking only", async () => {
    // The endpoint as /info publishes it: a browser lands on the landing page.
    const landing = await page.goto(stack.url);
    expect(new URL(page.url()).pathname).toBe(`${new URL(rest).pathname}/1.1`);
    await checkHtmlPage(page, landing, "walk-1-landing");
    expect(await page.locator("h1").textContent()).toBe(`Computing element ${new URL(stack.url).hostname}`);
    await checkHtmlPage(page, await follow(page, "Your jobs"), "walk-2-jobs");
    await checkHtmlPage(page, await follow(page, "browse me"), "walk-3-job");
    expect(await page.locator("h1").textContent()).toBe("Job browse me");
    // State history with reasons, from the errors file.
    const history = await page.locator("table").first().locator("tbody tr").allTextContents();
    expect(
      history.some((r) => /→ FINISHED/.test(r)),
      history.join("\n"),
    ).toBe(true);
    await checkHtmlPage(page, await follow(page, "Session files"), "walk-4-session");
    expect((await followFile(page, "out.txt")).content).toBe("hello\n");
    await checkHtmlPage(page, await follow(page, "Diagnose files"), "walk-5-diagnose");
    expect(await page.locator("tbody td.mono a").allTextContents()).toEqual(
      expect.arrayContaining(["errors", "local", "description", "status", "xml"]),
    );
    const errors = await followFile(page, "errors");
    expect(errors.content).toMatch(/Job state change .* -> FINISHED/);
    await screenshot(page, "walk-6-diagnose-errors");
    expectQuiet(watch);
  }, 60_000);

  it("a failed job: the failure, its history, Restart offered; the landing page groups the failure", async () => {
    await visitHtml(page, `${rest}/1.1/jobs/${jobs.failing}`, "job-failed");
    const failure = (await page.locator(".failure").textContent()) ?? "";
    expect(failure).toMatch(/Failure/);
    expect(failure.length).toBeGreaterThan(12);
    expect(await page.getByRole("button", { name: "Restart" }).count()).toBe(1);
    expect(await page.getByRole("button", { name: "Kill" }).count()).toBe(0);
    await visitHtml(page, `${rest}/1.1`, "landing");
    const row = page.locator("tr", { has: page.getByRole("link", { name: "fails", exact: true }) });
    expect(await row.locator("td").first().textContent()).toBe("1");
    expect(failure).toContain((await row.locator("td").nth(1).textContent()) ?? "-");
    expectQuiet(watch);
  });

  it("readable at 1,400 and 400 pixels: no page is wider than the window", async () => {
    const pages = {
      landing: `${rest}/1.1`,
      jobs: `${rest}/1.1/jobs`,
      job: `${rest}/1.1/jobs/${jobs.listing}`,
      "job-failed": `${rest}/1.1/jobs/${jobs.failing}`,
      session: `${rest}/1.1/jobs/${jobs.listing}/session/`,
      diagnose: `${rest}/1.1/jobs/${jobs.listing}/diagnose`,
      info: `${rest}/1.1/info`,
      "error-404": `${rest}/1.1/jobs/${randomUUID()}/session/`,
    };
    const wide: string[] = [];
    for (const width of [1400, 400]) {
      await page.setViewportSize({ width, height: 900 });
      for (const [name, url] of Object.entries(pages)) {
        await page.goto(url);
        const over = await overflowX(page);
        if (over.by > 0) wide.push(`${name} at ${width}px: ${over.by}px too wide: ${over.culprits.join(" | ")}`);
        await screenshot(page, `${width}px-${name}`);
      }
    }
    await page.setViewportSize({ width: 1100, height: 700 });
    expect(wide).toEqual([]);
  }, 90_000);

  it("keyboard: Tab reaches the links and buttons of the job page, Enter follows a link", async () => {
    await visitHtml(page, `${rest}/1.1/jobs/${jobs.failing}`, "job-failed");
    const stops = await tabStops(page, 25);
    for (const want of ["a:Jobs", "a:Session files", "a:Diagnose files", "button:Restart", "button:Clean (remove the job and its files)"])
      expect(stops, stops.join(" | ")).toContain(want);
    // Back to the top, then to "Diagnose files" and Enter.
    await page.goto(`${rest}/1.1/jobs/${jobs.failing}`);
    for (let i = 0; i < 25; i++) {
      await page.keyboard.press("Tab");
      if (
        (await page.evaluate(
          () => (globalThis as unknown as { document: { activeElement: { textContent: string } } }).document.activeElement.textContent,
        )) === "Diagnose files"
      )
        break;
    }
    await Promise.all([page.waitForURL(/\/diagnose$/), page.keyboard.press("Enter")]);
    expect(await page.locator("h1").textContent()).toBe("Diagnose files of fails");
    expectQuiet(watch);
  });

  it("the Kill button posts from the job page (same origin) and the job ends KILLED", async () => {
    const ce = ceClient(stack.url, stack.pki);
    const sleeper = await ce.submit(`&(executable="/bin/sleep")(arguments="300")(jobname="sleeper")`);
    await ce.waitForStates([sleeper], ["RUNNING", "QUEUING", "SUBMITTING", "PREPARED", "PREPARING", "ACCEPTED"], 30_000);
    await visitHtml(page, `${rest}/1.1/jobs/${sleeper}`, "job-sleeper");
    const [answer] = await Promise.all([
      page.waitForResponse((r) => r.request().method() === "POST"),
      page.getByRole("button", { name: "Kill" }).click(),
    ]);
    expect(answer.status()).toBe(202);
    await page.waitForLoadState("load");
    expect(await page.locator("[role=status]").textContent()).toContain("Queued for killing");
    await screenshot(page, "job-sleeper-killed");
    await checkHtmlPage(page, await follow(page, "Back to the job"), "job-sleeper-after-kill");
    expect(await page.locator(".notice").textContent()).toContain("Kill requested");
    expect(await ce.waitForStates([sleeper], ["KILLED"], 60_000)).toEqual({ [sleeper]: "KILLED" });
    expectQuiet(watch);
  }, 120_000);
});
