import type { Context } from "hono";
import type { Child } from "hono/jsx";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { bytesInWords } from "@ce/model";
import type { AppEnv } from "../context.js";
import { sendRendered } from "../render.js";

/*
 * The frame of every page for people (docs/pages.md): server-rendered with Hono's JSX, no script,
 * one inline style sheet (the CSP allows inline styles and nothing else to load). Layout rules
 * that keep pages readable from 400 to 1,400 pixels: wide tables scroll inside their own box
 * (`.scroll`), long values (DNs, URNs, ids) may break anywhere, and the page never overflows.
 */

const STYLE = `
*{box-sizing:border-box}
body{font-family:system-ui,sans-serif;margin:0;color:#1d1d1f;background:#fff;line-height:1.4}
header{background:#23395d;color:#fff;padding:.5em 1em}
header a{color:#fff}
nav.crumbs ol{list-style:none;margin:0;padding:0;display:flex;flex-wrap:wrap;gap:.2em .4em}
nav.crumbs li+li::before{content:"›";margin-right:.4em;color:#bcd}
main{padding:.5em 1em 2em;max-width:90em}
h1{font-size:1.35em;margin:.4em 0;overflow-wrap:anywhere}
h2{font-size:1.1em;margin:1.2em 0 .4em}
a{color:#0b57d0}
a:focus-visible,button:focus-visible,select:focus-visible,input:focus-visible,summary:focus-visible{outline:3px solid #f5a623;outline-offset:2px}
.scroll{overflow-x:auto;max-width:100%}
table{border-collapse:collapse;margin:.2em 0}
th,td{border:1px solid #ccd;padding:.25em .6em;text-align:left;vertical-align:top}
th{background:#eef1f6;font-weight:600}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
.mono{font-family:ui-monospace,monospace;overflow-wrap:anywhere}
.muted{color:#666}
.small{font-size:.85em}
.state{font-weight:600;white-space:nowrap}
.state-FAILED,.state-KILLED{color:#b3261e}
.state-FINISHED{color:#146c2e}
.state-RUNNING,.state-QUEUING{color:#0b57d0}
dl.kv{display:grid;grid-template-columns:minmax(8em,max-content) minmax(0,1fr);gap:.15em 1em;margin:.3em 0}
dl.kv dt{font-weight:600;color:#444;overflow-wrap:anywhere;min-width:0}
dl.kv dd{margin:0;overflow-wrap:anywhere;min-width:0}
.failure{border-left:4px solid #b3261e;background:#fdf0ef;padding:.4em .8em;margin:.6em 0;overflow-wrap:anywhere}
.failure h2{margin:.2em 0 .3em}
.failure p{margin:.3em 0}
pre.tail{background:#fff;border:1px solid #ccd;padding:.4em .6em;margin:.2em 0 .6em;max-height:22em;overflow:auto;white-space:pre-wrap;overflow-wrap:anywhere;font-size:.85em}
h3.small{margin:.6em 0 .2em}
code{font-family:ui-monospace,monospace;background:#f1f2f6;padding:0 .2em;overflow-wrap:anywhere}
.visually-hidden{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0);white-space:nowrap}
.notice{border-left:4px solid #146c2e;background:#eef8f0;padding:.4em .8em;margin:.6em 0}
.actions{display:flex;flex-wrap:wrap;gap:.5em;margin:.6em 0;align-items:center}
.actions form{margin:0}
button{font:inherit;padding:.3em .9em;border:1px solid #667;border-radius:4px;background:#f4f5f8;cursor:pointer}
button.danger{border-color:#b3261e;color:#b3261e}
form.filter{display:flex;flex-wrap:wrap;gap:.5em;align-items:end;margin:.4em 0}
form.filter label{display:flex;flex-direction:column;font-size:.85em}
select,input{font:inherit}
td.reason{min-width:12em;max-width:28em;overflow-wrap:anywhere}
ul.links{padding-left:1.2em}
ul.inline{list-style:none;padding:0;display:flex;flex-wrap:wrap;gap:.3em 1em}
details{border-left:2px solid #ccd;padding-left:.6em;margin:.2em 0}
summary{cursor:pointer;font-weight:600;overflow-wrap:anywhere}
p,li{overflow-wrap:anywhere}
@media (max-width:600px){
  main{padding:.5em .6em 2em}
  dl.kv{grid-template-columns:minmax(0,1fr)}
  dl.kv dd{margin-bottom:.4em}
  details{padding-left:.35em}
  th,td{padding:.2em .35em}
  .wide-only{display:none}
}
`;

export interface Crumb {
  label: string;
  /** Absent for the current page (the last crumb). */
  href?: string | undefined;
}

/** A whole page: header with the breadcrumb trail, a heading, the content. */
export function Layout(props: {
  title: string;
  crumbs: Crumb[];
  children?: Child;
  /** Go on to this URL at once (pages/actions.tsx: after a POST); the page links it too. */
  refresh?: string | undefined;
  /** Reload this URL every `seconds` (the job list's opt-in auto-refresh). */
  autoRefresh?: { seconds: number; url: string } | undefined;
}) {
  return (
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <title>{props.title}</title>
        {props.refresh !== undefined ? <meta http-equiv="refresh" content={`0; url=${props.refresh}`} /> : ""}
        {props.autoRefresh ? <meta http-equiv="refresh" content={`${props.autoRefresh.seconds}; url=${props.autoRefresh.url}`} /> : ""}
        {/* A constant of this file: JSX would escape its quotes and `>` as text. */}
        <style dangerouslySetInnerHTML={{ __html: STYLE }} />
      </head>
      <body>
        <header>
          <nav class="crumbs" aria-label="Breadcrumb">
            <ol>
              {props.crumbs.map((c) => (
                <li>{c.href !== undefined ? <a href={c.href}>{c.label}</a> : <span aria-current="page">{c.label}</span>}</li>
              ))}
            </ol>
          </nav>
        </header>
        <main>
          <h1>{props.title}</h1>
          {props.children}
        </main>
      </body>
    </html>
  );
}

/** A page element as the HTML answer: the negotiated-HTML headers of render.ts (CSP, length). */
export function sendPage(c: Context<AppEnv>, page: Child, status: ContentfulStatusCode = 200, headers?: Record<string, string>): Response {
  const body = page?.toString() ?? "";
  // Every component here is synchronous; an async one would make a Promise, never a page.
  if (typeof body !== "string") throw new Error("pages: an asynchronous component was rendered");
  return sendRendered(c, `<!DOCTYPE html>\n${body}\n`, "html", { status, ...(headers ? { headers } : {}) });
}

/** Where the pages of this request's REST version live (`/arex/rest/1.1`). */
export function restBase(c: Context<AppEnv>): string {
  const version = c.get("version") ?? c.req.param("version") ?? "1.1";
  return `${c.get("services").config.mountPath}/rest/${version}`;
}

/** The breadcrumb trail: the CE's landing page first, then `rest` (the last one is this page). */
export function trail(c: Context<AppEnv>, ...rest: Crumb[]): Crumb[] {
  const host = new URL(c.get("services").config.endpoint.url).hostname;
  return [{ label: host, href: rest.length ? restBase(c) : undefined }, ...rest];
}

export const jobHref = (base: string, id: string) => `${base}/jobs/${encodeURIComponent(id)}`;

/** `2026-03-01 12:34:56Z`: UTC, seconds, readable and sortable. */
export function when(ms: number | undefined): string {
  if (ms === undefined || !Number.isFinite(ms) || ms <= 0) return "";
  return new Date(ms)
    .toISOString()
    .replace("T", " ")
    .replace(/\.\d{3}Z$/, "Z");
}

/** A time with its age: `<time>` carries the exact UTC value, the text says how long ago. */
export function Time(props: { ms: number | undefined; now: number }) {
  const exact = when(props.ms);
  if (!exact) return <span class="muted">–</span>;
  return (
    <time datetime={exact.replace(" ", "T")} title={exact}>
      {exact} <span class="muted small">({relative(props.now - (props.ms ?? 0))})</span>
    </time>
  );
}

/** How long ago (`ms` > 0) or how far ahead (session removal, proxy expiry): `5 min ago`, `in 7 d`. */
export function relative(ms: number): string {
  return ms >= 0 ? `${duration(ms)} ago` : `in ${duration(-ms)}`;
}
export const ago = (ms: number) => relative(Math.max(0, ms));

function duration(ms: number): string {
  const s = Math.round(ms / 1000);
  if (s < 90) return `${s} s`;
  if (s < 90 * 60) return `${Math.round(s / 60)} min`;
  if (s < 36 * 3600) return `${Math.round(s / 3600)} h`;
  return `${Math.round(s / 86400)} d`;
}

/** Sizes for people: the one rounding of @ce/model (ceadm prints the same). */
export const bytes = bytesInWords;

export function StateBadge(props: { state: string }) {
  return <span class={`state state-${props.state}`}>{props.state}</span>;
}

/** The last `CN=` of a DN (what people call the owner); the whole DN stays in the title. */
export function shortDn(dn: string): string {
  const cns = [...dn.matchAll(/CN=([^/,]+)/g)].map((m) => m[1]!);
  return cns.at(-1) ?? dn;
}
