/** @jsxImportSource hono/jsx */
import type { Child } from "hono/jsx";

/*
 * The frame of every page for people, the CE's (apps/gateway/src/pages, docs/pages.md) and the
 * admin listener's index alike: server-rendered with Hono's JSX, no script, one inline style
 * sheet (the CSP allows inline styles and nothing else to load). Layout rules that keep pages
 * readable from 400 to 1,400 pixels: wide tables scroll inside their own box (`.scroll`), long
 * values (DNs, URNs, ids) may break anywhere, and the page never overflows.
 */

export const STYLE = `
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
  /** Go on to this URL at once (after a POST); the page links it too. */
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

/** The page as a document string (every component here is synchronous). */
export function renderPage(page: Child): string {
  const body = page?.toString() ?? "";
  // An asynchronous component would make a Promise, never a page.
  if (typeof body !== "string") throw new Error("pages: an asynchronous component was rendered");
  return `<!DOCTYPE html>\n${body}\n`;
}
