import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
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
const jobNames = (page: Page) => page.locator("tbody tr td:nth-child(2) > a").allTextContents();

const LISTING_XRSL =
  `&(executable="/bin/sh")(jobname="browse me")(stdout="out.txt")(stderr="err.txt")` +
  `(arguments="-c" "mkdir -p sub/deep; echo inner > sub/inner.txt; echo deep > sub/deep/d.txt; echo hello; echo oops >&2; ` +
  `echo x > ${sq(XSS_IMG)}; echo y > ${sq(ODD_NAME)}")` +
  `(outputfiles=("out.txt" "")("err.txt" "")("sub/" "")("${XSS_IMG}" "")("${ODD_NAME}" ""))`;
const SCRIPT_NAME_XRSL = `&(executable="/bin/echo")(arguments="hi")(jobname="${XSS_SCRIPT}")(stdout="out.txt")(outputfiles=("out.txt" ""))`;
const FAILING_XRSL = `&(executable="/bin/sh")(arguments="-c" "echo bad >&2; exit 3")(jobname="fails")(rerun="1")(stderr="err.txt")(outputfiles=("err.txt" ""))`;
/** The case: stderr named but not kept as an output, so it is gone when the page is read. */
const QUIET_XRSL = `&(executable="/bin/sh")(arguments="-c" "echo about to fail >&2; exit 3")(jobname="fails quietly")(stderr="err.txt")`;

describe.skipIf(!HAVE_CHROMIUM)("HTML pages in headless Chromium (client certificate, dev CA trusted)", () => {
  let stack: Stack;
  let remote: RemoteBrowser;
  let context: BrowserContext;
  let page: Page;
  let watch: PageWatch;
  let rest: string;
  const jobs = { listing: "", scriptName: "", failing: "", quiet: "" };

  beforeAll(async () => {
    stack = await startStack({ redisUrl: inject("redisUrl"), redisUsers: inject("redisUsers"), backend: "fork" });
    rest = `${stack.url}/rest`;
    const ce = ceClient(stack.url, stack.pki);
    jobs.listing = await ce.submit(LISTING_XRSL);
    jobs.scriptName = await ce.submit(SCRIPT_NAME_XRSL);
    jobs.failing = await ce.submit(FAILING_XRSL);
    jobs.quiet = await ce.submit(QUIET_XRSL);
    const states = await ce.waitForStates(Object.values(jobs), ["FINISHED", "FAILED", "KILLED", "WIPED"], 90_000);
    expect(states).toEqual({
      [jobs.listing]: "FINISHED",
      [jobs.scriptName]: "FINISHED",
      [jobs.failing]: "FAILED",
      [jobs.quiet]: "FAILED",
    });

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

  it("/rest lists the supported versions; versions and delegations are framed like every page", async () => {
    await visitHtml(page, `${rest}/1.1/delegations`, "delegations");
    expect(await page.locator("h1").textContent()).toBe("Delegations");
    expect(await page.locator("nav.crumbs li").allTextContents()).toEqual([new URL(stack.url).hostname, "Delegations"]);
    await visitHtml(page, rest, "versions");
    expect(await page.title()).toBe("Supported REST versions");
    expect(await page.locator("nav.crumbs li").allTextContents()).toEqual([new URL(stack.url).hostname, "Supported REST versions"]);
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
      "Select",
      "Name",
      "State",
      "Owner",
      "Submitted ▼",
      "Last change",
      "Exit code",
      "Reason",
      "Files",
    ]);
    const failing = page.locator("tr", { has: page.getByRole("link", { name: "fails", exact: true }) });
    expect(await failing.locator("td").nth(2).textContent()).toBe("FAILED");
    expect(await failing.locator("td").nth(6).textContent()).toBe("3");
    // The reason in words, without A-REX's `LRMS error: (3)`.
    expect(await failing.locator("td").nth(7).textContent()).toBe("The executable exited with code 3");
    expectQuiet(watch);
  });

  it("the job table filters by state and sorts by column, by clicking", async () => {
    await visitHtml(page, `${rest}/1.1/jobs`, "jobs");
    await checkHtmlPage(page, await follow(page, "FAILED (2)"), "jobs-failed");
    expect(await jobNames(page)).toEqual(["fails quietly", "fails"]);
    await checkHtmlPage(page, await follow(page, "All (4)"), "jobs-all");
    await checkHtmlPage(page, await follow(page, "Name"), "jobs-by-name");
    expect(await jobNames(page)).toEqual([XSS_SCRIPT, "browse me", "fails", "fails quietly"]);
    await checkHtmlPage(page, await follow(page, "Name ▲"), "jobs-by-name-desc");
    expect(await jobNames(page)).toEqual(["fails quietly", "fails", "browse me", XSS_SCRIPT]);
    // Search by name, with the search box and its button.
    await page.getByLabel("Name contains").fill("QUIET");
    await Promise.all([page.waitForURL(/name=QUIET/), page.getByRole("button", { name: "Show" }).click()]);
    await page.waitForLoadState("load");
    expect(await jobNames(page)).toEqual(["fails quietly"]);
    await screenshot(page, "jobs-search");
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

  it("an unknown job's session is a 404 page in the frame: the reason as heading, ways on, the code small", async () => {
    await visitHtml(page, `${rest}/1.1/jobs/${randomUUID()}/session/`, "error-404-unknown-job", 404);
    expect(await page.locator("h1").textContent()).toBe("Job not found");
    expect(await page.locator("nav.crumbs li").allTextContents()).toEqual([new URL(stack.url).hostname, "Error"]);
    expect(await page.getByRole("link", { name: "your jobs" }).count()).toBe(1);
    expect(await page.locator("p.muted.small").last().textContent()).toMatch(/^HTTP status 404, error code JOB_NOT_FOUND/);

    await visitHtml(page, `${rest}/1.1/jobs/${jobs.listing}/session/no-such-file`, "error-404-missing-file", 404);
    expect(await page.locator("h1").textContent()).not.toMatch(/^404/);
    expectQuiet(watch);
  });

  it("without a certificate: a 401 page that says how to import the .p12 into Firefox and Chrome", async () => {
    // A certificate for another origin only: Playwright then verifies TLS against the dev CA (as
    // for the other contexts) and this CE gets no client certificate.
    const anonymous = await remote.browser.newContext({
      clientCertificates: [
        { origin: "https://elsewhere.invalid", certPath: `${stack.pki}/user/cert.pem`, keyPath: `${stack.pki}/user/key.pem` },
      ],
      ignoreHTTPSErrors: false,
    });
    try {
      const p = await anonymous.newPage();
      const r = await p.goto(`${rest}/1.1/jobs`);
      expect(r?.status()).toBe(401);
      const help = (await p.locator("#cert-help").locator("..").textContent()) ?? "";
      expect(help).toContain("openssl pkcs12 -export");
      expect(help).toMatch(/Firefox.*Your Certificates.*Import/s);
      expect(help).toMatch(/Chrome.*Manage certificates.*Import/s);
      await screenshot(p, "error-401-certificate-help");
    } finally {
      await anonymous.close();
    }
  });

  it("user-controlled text is escaped: a reflected error reason", async () => {
    const { response } = await visitHtml(page, `${rest}/1.1/jobs?state=${encodeURIComponent(XSS_SCRIPT)}`, "error-400-escaped", 400);
    expect(await page.locator("h1").textContent()).toContain(XSS_SCRIPT);
    expect(await page.textContent("main")).toContain(`"${XSS_SCRIPT}"`);
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
      history.some((r) => /delivering outputs → finished/.test(r)),
      history.join("\n"),
    ).toBe(true);
    await checkHtmlPage(page, await follow(page, "Session files"), "walk-4-session");
    expect((await followFile(page, "out.txt")).content).toBe("hello\n");
    await checkHtmlPage(page, await follow(page, "Diagnose files"), "walk-5-diagnose");
    expect(await page.locator("tbody td.mono a").allTextContents()).toEqual(
      expect.arrayContaining(["errors", "local", "description", "status", "xml"]),
    );
    const errors = await followFile(page, "errors", { stay: true });
    expect(errors.content).toMatch(/Job state change .* -> FINISHED/);
    await screenshot(page, "walk-6-diagnose-errors");
    expectQuiet(watch);
  }, 60_000);

  it("a failed job says why in words: cause, what to do, its stderr's last lines; history in user state names", async () => {
    await visitHtml(page, `${rest}/1.1/jobs/${jobs.failing}`, "job-failed-why");
    const box = page.locator(".failure");
    const why = (await box.textContent()) ?? "";
    expect(why).toContain("The executable exited with code 3");
    expect(why).toContain("its standard error usually says why");
    expect(why).not.toMatch(/LRMS error/);
    expect(await box.locator("pre.tail").first().textContent()).toBe("bad");
    // The state history ends in words: no internal names, a failed job does not "finish".
    const changes = await page.locator("td.state").allTextContents();
    expect(changes.at(-1)).toBe("delivering outputs → failed");
    expect(changes.join(" | ")).not.toMatch(/PENDING:|INLRMS|FINISHING|FINISHED/);
    // The executable's stderr, named though it is no output file, and how to keep it next time.
    await visitHtml(page, `${rest}/1.1/jobs/${jobs.quiet}`, "job-failed-quiet");
    const quiet = (await page.locator(".failure").textContent()) ?? "";
    expect(quiet).toContain("The executable exited with code 3");
    expect(quiet).toMatch(/standard error \(err\.txt\) was removed when the job ended: it is not one of the job's output files/);
    expect(quiet).toContain('add ("err.txt" "") to (outputfiles=…)');
    expect(quiet).toMatch(/description named no standard output file/);
    expectQuiet(watch);
  });

  it("a failed job: the failure, Restart offered; the landing page groups the failure", async () => {
    await visitHtml(page, `${rest}/1.1/jobs/${jobs.failing}`, "job-failed");
    const failure = (await page.locator(".failure").textContent()) ?? "";
    expect(failure).toMatch(/Why it failed/);
    expect(await page.getByRole("button", { name: "Restart" }).count()).toBe(1);
    expect(await page.getByRole("button", { name: "Kill" }).count()).toBe(0);
    await visitHtml(page, `${rest}/1.1`, "landing");
    // Both exit-3 failures are one group, whichever of the two ended last is linked (they end
    // within the same second, so either may be the newest).
    const row = page.locator("tr", { has: page.getByRole("link", { name: /^fails( quietly)?$/ }) });
    expect(await row.locator("td").first().textContent()).toBe("2");
    expect(failure).toContain((await row.locator("td").nth(1).textContent()) ?? "-");
    expectQuiet(watch);
  });

  it("readable at 1,400 and 400 pixels: no page is wider than the window", async () => {
    const pages = {
      landing: `${rest}/1.1`,
      jobs: `${rest}/1.1/jobs`,
      job: `${rest}/1.1/jobs/${jobs.listing}`,
      "job-failed": `${rest}/1.1/jobs/${jobs.failing}`,
      "job-failed-quiet": `${rest}/1.1/jobs/${jobs.quiet}`,
      delegations: `${rest}/1.1/delegations`,
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
    // Back on the job page by itself (a GET), with a notice in words: no HTTP code, no id for a name.
    await page.waitForURL(/\?done=kill$/);
    await page.waitForLoadState("load");
    expect(new URL(page.url()).pathname).toBe(`${new URL(rest).pathname}/1.1/jobs/${sleeper}`);
    expect(await page.locator("h1").textContent()).toBe("Job sleeper");
    expect(await page.locator(".notice").textContent()).toBe("Kill requested: the job is being cancelled.");
    const body = (await page.textContent("main")) ?? "";
    expect(body).not.toMatch(/\b202\b|Queued for/);
    expect(await page.locator("nav.crumbs li").allTextContents()).toEqual([new URL(stack.url).hostname, "Jobs", "sleeper"]);
    await screenshot(page, "job-sleeper-after-kill");
    expect(await ce.waitForStates([sleeper], ["KILLED"], 60_000)).toEqual({ [sleeper]: "KILLED" });
    expectQuiet(watch);
  }, 120_000);

  it("stdout opens as text in the browser; its Download link saves it under its name", async () => {
    await visitHtml(page, `${rest}/1.1/jobs/${jobs.listing}`, "job-listing-files");
    const [response] = await Promise.all([
      page.waitForResponse((r) => r.url().endsWith("/session/out.txt?view=text")),
      page.getByRole("link", { name: "out.txt", exact: true }).click(),
    ]);
    expect(response.headers()["content-type"]).toBe("text/plain; charset=utf-8");
    expect(response.headers()["x-content-type-options"]).toBe("nosniff");
    await page.waitForLoadState("load");
    expect(await page.textContent("body")).toBe("hello\n");
    await screenshot(page, "stdout-inline");
    await page.goBack();
    const [download] = await Promise.all([page.waitForEvent("download"), page.getByRole("link", { name: "Download out.txt" }).click()]);
    expect(download.suggestedFilename()).toBe("out.txt");
    // "Download all": the job's outputs as one tar, saved under the job's id, read back by GNU tar.
    const [all] = await Promise.all([page.waitForEvent("download"), page.getByRole("link", { name: "Download all (tar)" }).click()]);
    expect(all.suggestedFilename()).toBe(`${jobs.listing}.tar`);
    const saved = `${stack.state}/all-${jobs.listing}.tar`;
    await all.saveAs(saved);
    const names = execFileSync("tar", ["-tf", saved], { encoding: "utf8" }).trim().split("\n");
    for (const n of ["out.txt", "err.txt", "sub/inner.txt", "sub/deep/d.txt", XSS_IMG, ODD_NAME])
      expect(names).toContain(`${jobs.listing}/${n}`);
    expectQuiet(watch);
  });

  it("the admin listener's index: the token once, then the links to health, metrics, the queue view and the docs, in the pages' frame", async () => {
    const jemPort = /jemPort: (\d+)/.exec(readFileSync(stack.config, "utf8"))?.[1];
    expect(jemPort).toBeDefined();
    const admin = `http://127.0.0.1:${jemPort}`;
    const res = await page.goto(`${admin}/`);
    expect(res?.status()).toBe(401);
    expect(await page.getByRole("heading", { level: 1 }).textContent()).toBe("The admin token is needed");
    await page.goto(`${admin}/?token=${encodeURIComponent(stack.adminToken)}`);
    expect(page.url()).toBe(`${admin}/`);
    expect(await page.getByRole("heading", { level: 1 }).textContent()).toBe("CE admin: jem");
    for (const name of ["/healthz", "/readyz", "/metrics", "/queues", "/api/stats"])
      expect(await page.getByRole("link", { name, exact: true }).isVisible(), name).toBe(true);
    expect(await page.locator("header nav.crumbs").count()).toBe(1);
    await screenshot(page, "admin-index");
    await page.getByRole("link", { name: "/metrics", exact: true }).click();
    expect(await page.textContent("body")).toContain("ce_jobs");
  });

  it("Clean asks first: one click leaves the job; the confirmation removes it and lands on the list", async () => {
    const ce = ceClient(stack.url, stack.pki);
    const done = await ce.submit(`&(executable="/bin/true")(jobname="clean me")`);
    await ce.waitForStates([done], ["FINISHED"], 60_000);
    await visitHtml(page, `${rest}/1.1/jobs/${done}`, "job-clean-me");
    await Promise.all([page.waitForURL(`${rest}/1.1/jobs/${done}`), page.getByRole("button", { name: /^Clean/ }).click()]);
    await page.waitForLoadState("load");
    expect(await page.locator("h1").textContent()).toBe("Remove the job clean me and its files?");
    await screenshot(page, "job-clean-confirm");
    expect((await ce.waitForStates([done], ["FINISHED"], 1_000))[done]).toBe("FINISHED");
    // "No" goes back and changes nothing.
    await checkHtmlPage(page, await follow(page, "No, keep it"), "job-clean-kept");
    expect(await page.locator("h1").textContent()).toBe("Job clean me");
    await page.getByRole("button", { name: /^Clean/ }).click();
    await page.waitForLoadState("load");
    await page.getByRole("button", { name: "Yes, remove it" }).click();
    await page.waitForURL(/\/jobs\?done=clean$/);
    await page.waitForLoadState("load");
    expect(await page.locator(".notice").textContent()).toBe("Clean requested: the job and its files are being removed.");
    await screenshot(page, "jobs-after-clean");
    expect(await ce.waitForStates([done], ["None", ""], 60_000)).toBeTruthy();
    expectQuiet(watch);
  }, 120_000);

  it("bulk: tick rows, Kill selected, confirm; the jobs end KILLED", async () => {
    const ce = ceClient(stack.url, stack.pki);
    const a = await ce.submit(`&(executable="/bin/sleep")(arguments="300")(jobname="bulk a")`);
    const b = await ce.submit(`&(executable="/bin/sleep")(arguments="300")(jobname="bulk b")`);
    await visitHtml(page, `${rest}/1.1/jobs?name=bulk`, "jobs-bulk");
    await page.getByRole("checkbox", { name: "select bulk a" }).check();
    await page.getByRole("checkbox", { name: "select bulk b" }).check();
    await page.getByRole("button", { name: "Kill selected" }).click();
    await page.waitForLoadState("load");
    expect(await page.locator("h1").textContent()).toBe("Kill 2 jobs?");
    expect(await page.locator("main li").allTextContents()).toEqual(
      expect.arrayContaining([expect.stringMatching(/^bulk a /), expect.stringMatching(/^bulk b /)]),
    );
    await screenshot(page, "jobs-bulk-confirm");
    await page.getByRole("button", { name: "Yes, kill them" }).click();
    await page.waitForURL(/\/jobs\?done=bulk-kill$/);
    await page.waitForLoadState("load");
    expect(await page.locator(".notice").textContent()).toBe("Kill requested for the selected jobs.");
    await screenshot(page, "jobs-after-bulk-kill");
    expect(await ce.waitForStates([a, b], ["KILLED"], 60_000)).toEqual({ [a]: "KILLED", [b]: "KILLED" });
    expectQuiet(watch);
  }, 120_000);
});
