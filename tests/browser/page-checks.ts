import { mkdirSync } from "node:fs";
import { resolve } from "node:path";
import { expect } from "vitest";
import type { Download, Page, Response } from "playwright-core";

const ROOT = resolve(import.meta.dirname, "../..");

// The workspace compiles without the DOM lib: the few DOM shapes the in-page functions use.
interface DomNode {
  tagName: string;
  textContent: string | null;
  href?: string;
  attributes: ArrayLike<{ name: string }>;
  children: { length: number };
  getAttribute(name: string): string | null;
  getBoundingClientRect(): { width: number; top: number };
}
interface DomDocument {
  querySelectorAll(selector: string): ArrayLike<DomNode>;
  createRange(): { selectNodeContents(n: DomNode): void; getClientRects(): ArrayLike<{ top: number }> };
}
export const SCREENSHOTS = resolve(ROOT, "tests/artifacts/screenshots");

/** Everything a page did that an escaped, script-free page never does. */
export interface PageWatch {
  dialogs: string[];
  /** Console messages about Content-Security-Policy refusals (something tried to run or load). */
  csp: string[];
  pageErrors: string[];
}

export function watchPage(page: Page): PageWatch {
  const w: PageWatch = { dialogs: [], csp: [], pageErrors: [] };
  page.on("dialog", (d) => {
    w.dialogs.push(`${d.type()}: ${d.message()} on ${page.url()}`);
    void d.dismiss().catch(() => undefined);
  });
  page.on("console", (m) => {
    if (/content security policy/i.test(m.text())) w.csp.push(`${m.text()} on ${page.url()}`);
  });
  page.on("pageerror", (e) => w.pageErrors.push(`${e.message} on ${page.url()}`));
  return w;
}

export function expectQuiet(w: PageWatch): void {
  expect(w.dialogs, "no dialog may fire").toEqual([]);
  expect(w.csp, "no CSP refusal (nothing injected tried to run or load)").toEqual([]);
  expect(w.pageErrors, "no script errors").toEqual([]);
}

export interface Link {
  text: string;
  /** Absolute URL as the browser resolved it. */
  href: string;
  /** The attribute as written. */
  raw: string;
}

export async function linksOf(page: Page): Promise<Link[]> {
  return page.$$eval("a[href]", (as: DomNode[]) =>
    as.map((a) => ({ text: a.textContent ?? "", href: a.href ?? "", raw: a.getAttribute("href") ?? "" })),
  );
}

const resolved = new Map<string, number>();

/** Every link on the page answers GET with a status below 400 (same context: client cert, trust). */
export async function expectLinksResolve(page: Page): Promise<Link[]> {
  const links = await linksOf(page);
  const bad: string[] = [];
  for (const l of links) {
    let status = resolved.get(l.href);
    if (status === undefined) {
      const r = await page.request.get(l.href, { maxRedirects: 5 });
      status = r.status();
      resolved.set(l.href, status);
    }
    if (status >= 400) bad.push(`${l.raw} (${JSON.stringify(l.text)}) → ${status}`);
  }
  expect(bad, `links on ${page.url()} that do not resolve`).toEqual([]);
  return links;
}

/**
 * No active content: the renderers only ever emit tables, text, links and forms that stay on this
 * CE (the job table's GET filter, the job page's POST buttons: an action that is a path).
 */
export async function expectNoActiveContent(page: Page): Promise<void> {
  const found = await page.evaluate(() => {
    const out: string[] = [];
    const doc = (globalThis as unknown as { document: DomDocument }).document;
    for (const el of Array.from(doc.querySelectorAll("*"))) {
      const tag = el.tagName.toLowerCase();
      if (["script", "img", "iframe", "object", "embed", "svg", "base", "link"].includes(tag)) out.push(`<${tag}>`);
      if (tag === "form" && !/^\/[^/]/.test(el.getAttribute("action") ?? "")) out.push(`<form action=${el.getAttribute("action")}>`);
      for (const a of Array.from(el.attributes)) if (/^on/i.test(a.name)) out.push(`${tag}[${a.name}]`);
      if (tag === "a" && /^\s*javascript:/i.test(el.getAttribute("href") ?? "")) out.push("javascript: link");
    }
    return out;
  });
  expect(found, `active content on ${page.url()}`).toEqual([]);
}

/**
 * Horizontal overflow of the page: how far the document is wider than the window (0 = none), and
 * the first elements whose right edge is past the window (what to fix).
 */
export async function overflowX(page: Page): Promise<{ by: number; culprits: string[] }> {
  return page.evaluate(() => {
    type R = { right: number };
    type E = { tagName: string; className: string; textContent: string | null; getBoundingClientRect(): R };
    const g = globalThis as unknown as {
      document: { documentElement: { scrollWidth: number }; querySelectorAll(s: string): ArrayLike<E> };
      innerWidth: number;
    };
    const by = g.document.documentElement.scrollWidth - g.innerWidth;
    const culprits =
      by <= 0
        ? []
        : Array.from(g.document.querySelectorAll("body *"))
            .filter((e) => e.getBoundingClientRect().right > g.innerWidth + 1)
            .slice(-3)
            .map((e) => `<${e.tagName.toLowerCase()} class="${e.className}"> ${(e.textContent ?? "").slice(0, 60)}`);
    return { by, culprits };
  });
}

/** What Tab reaches, in order: `a:<text>`, `button:<text>`, `select:<name>`, … (up to `max` presses). */
export async function tabStops(page: Page, max: number): Promise<string[]> {
  const out: string[] = [];
  for (let i = 0; i < max; i++) {
    await page.keyboard.press("Tab");
    const here = await page.evaluate(() => {
      const el = (globalThis as unknown as { document: { activeElement: DomNode | null } }).document.activeElement;
      if (!el || el.tagName === "BODY") return "";
      const name = el.getAttribute("name");
      return `${el.tagName.toLowerCase()}:${name && el.tagName !== "BUTTON" ? name : (el.textContent ?? "").trim()}`;
    });
    if (here) out.push(here);
  }
  return out;
}

export async function screenshot(page: Page, name: string): Promise<string> {
  mkdirSync(SCREENSHOTS, { recursive: true });
  const path = resolve(SCREENSHOTS, `${name}.png`);
  await page.screenshot({ path, fullPage: true });
  return path;
}

export interface HtmlVisit {
  response: Response;
  links: Link[];
}

/**
 * Checks the page now shown is one of the CE's HTML renderings: status, `text/html`, the CSP
 * header, a title and heading, no active content, every link resolving; then a screenshot.
 */
export async function checkHtmlPage(page: Page, response: Response | null, name: string, status = 200): Promise<HtmlVisit> {
  expect(response, `no response for ${name}`).toBeTruthy();
  const r = response!;
  expect(r.status(), `status of ${r.url()}`).toBe(status);
  const headers = await r.allHeaders();
  expect(headers["content-type"]).toMatch(/^text\/html\b/);
  expect(headers["content-security-policy"]).toContain("default-src 'none'");
  expect((await page.title()).length).toBeGreaterThan(0);
  await expect.poll(() => page.locator("h1").count()).toBe(1);
  await expectNoActiveContent(page);
  // Figures are rounded for people: no `0.06999999999999999 s`.
  expect((await page.textContent("body")) ?? "", `unrounded figure on ${r.url()}`).not.toMatch(/\d\.\d{4,}/);
  const links = await expectLinksResolve(page);
  await screenshot(page, name);
  return { response: r, links };
}

export async function visitHtml(page: Page, url: string, name: string, status = 200): Promise<HtmlVisit> {
  const response = await page.goto(url, { waitUntil: "load" });
  return checkHtmlPage(page, response, name, status);
}

/** Clicks a link and waits for the navigation it causes; returns the main document response. */
export async function follow(page: Page, text: string): Promise<Response | null> {
  const link = page.getByRole("link", { name: text, exact: true });
  await expect.poll(() => link.count(), { message: `one link named ${JSON.stringify(text)} on ${page.url()}` }).toBe(1);
  const href = await link.evaluate((a: DomNode) => a.href ?? "");
  const [response] = await Promise.all([page.waitForResponse((r) => r.url() === href && r.request().isNavigationRequest()), link.click()]);
  await page.waitForURL(href);
  await page.waitForLoadState("load");
  return response;
}

async function readDownload(d: Download): Promise<string> {
  const stream = await d.createReadStream();
  const chunks: Buffer[] = [];
  for await (const c of stream) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

/**
 * Follows a file link. The browser either shows the content (navigation: the pages link text files
 * with `?view=text`) or downloads it; both are fine for a file. Returns how it was handled and the
 * content, back on the page of the link unless `stay`.
 */
export async function followFile(
  page: Page,
  text: string,
  opts: { stay?: boolean } = {},
): Promise<{ via: "download" | "shown"; content: string; url: string }> {
  const link = page.getByRole("link", { name: text, exact: true });
  await expect.poll(() => link.count(), { message: `one link named ${JSON.stringify(text)} on ${page.url()}` }).toBe(1);
  const href = await link.evaluate((a: DomNode) => a.href ?? "");
  const from = page.url();
  const download = page.waitForEvent("download", { timeout: 15_000 }).then((d) => ({ d }));
  // A download aborts the navigation (net::ERR_ABORTED): then only the download event counts.
  const shown = page.waitForURL(href, { timeout: 15_000 }).then(
    () => ({ d: undefined }),
    () => new Promise<never>(() => undefined),
  );
  await link.click();
  const got = await Promise.race([download, shown]);
  if (got.d) {
    expect(page.url(), "a download leaves the listing in place").toBe(from);
    return { via: "download", content: await readDownload(got.d), url: got.d.url() };
  }
  const shownFile = { via: "shown" as const, content: (await page.textContent("body")) ?? "", url: page.url() };
  // Back where the link was, as after a download (unless the caller wants to look at the file).
  if (!opts.stay) await page.goBack({ waitUntil: "load" });
  return shownFile;
}

/**
 * Value cells squeezed so narrow that their text is unreadable: at least 3 rendered lines with
 * fewer than 12 characters per line on average (a URN wrapped one or two characters a line).
 */
export async function squeezedCells(page: Page): Promise<string[]> {
  return page.$$eval("td", (tds: DomNode[]) =>
    tds.flatMap((td) => {
      if (td.children.length > 0) return [];
      const text = (td.textContent ?? "").trim();
      if (text.length < 12) return [];
      const range = (globalThis as unknown as { document: DomDocument }).document.createRange();
      range.selectNodeContents(td);
      const lines = new Set(Array.from(range.getClientRects()).map((r) => Math.round(r.top))).size;
      return lines >= 3 && text.length / lines < 12
        ? [`${JSON.stringify(text)}: ${lines} lines in ${Math.round(td.getBoundingClientRect().width)}px`]
        : [];
    }),
  );
}
