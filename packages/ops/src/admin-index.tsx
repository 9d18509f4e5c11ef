/** @jsxImportSource hono/jsx */
import { Layout, renderPage } from "./frame.js";
import type { Role } from "./metrics.js";

/*
 * The admin listener's `/` for a person: what is served here and where the rest is, in the frame
 * of the CE's pages. Behind the admin token like everything but /healthz; a browser without it
 * gets `tokenHelpPage` instead of the JSON 401.
 */

/** The CSP of the CE's pages: nothing loads or runs, inline style only. */
export const ADMIN_PAGE_HEADERS = {
  "Content-Type": "text/html; charset=utf-8",
  "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  "X-Content-Type-Options": "nosniff",
  "Cache-Control": "no-store",
};

export interface AdminIndexFacts {
  role: Role;
  /** bull-board mounted here at /queues. */
  board: boolean;
  /** The JEM's admin port (the queue view lives there when this is a gateway). */
  jemPort?: number | undefined;
  /** The CE's public endpoint (`endpoint.url`): its pages for people are under `/rest/1.1`. */
  endpointUrl?: string | undefined;
  /** Where the site publishes the operator documentation (`admin.docsUrl`). */
  docsUrl?: string | undefined;
}

const DOCS: readonly [string, string][] = [
  ["docs/operations.md", "running the CE: the admin side, logs, metrics and alerts, upgrades"],
  ["packages/ops/README.md", "the admin listener, its JSON API and ceadm"],
  ["docs/configuration.md", "every configuration key"],
  ["docs/security.md", "privilege separation and the attacks the CE is tested against"],
];

export function adminIndexPage(f: AdminIndexFacts): string {
  const title = `CE admin: ${f.role}`;
  return renderPage(
    <Layout title={title} crumbs={[{ label: `admin (${f.role})` }]}>
      <p>
        This is the {f.role === "jem" ? "job execution manager's" : "gateway's"} admin listener: loopback, plain HTTP, the admin token. All
        times here are UTC, except in the queue view, which shows your browser's local time.
      </p>
      <h2>Health</h2>
      <ul class="links">
        <li>
          <a href="/healthz">/healthz</a> — alive (no token needed; for a process manager)
        </li>
        <li>
          <a href="/readyz">/readyz</a> — ready: Redis answers and the {f.role === "jem" ? "workers run" : "user listener is up"} (503 when
          not)
        </li>
      </ul>
      <h2>Metrics</h2>
      <ul class="links">
        <li>
          <a href="/metrics">/metrics</a> — Prometheus text: jobs per state, requests, batch-system calls, staging, queue depths, Redis and
          JEM heartbeats
        </li>
      </ul>
      <h2>Queue view</h2>
      {f.board ? (
        <ul class="links">
          <li>
            <a href="/queues">/queues</a> — bull-board: the staging queues and the JEM's work list (<code>advance</code>, read-only)
          </li>
        </ul>
      ) : (
        <p>
          The queues are shown by the JEM's admin listener
          {f.jemPort !== undefined ? (
            <>
              {" "}
              (port <code>{String(f.jemPort)}</code>, <code>admin.jemPort</code>)
            </>
          ) : (
            ""
          )}{" "}
          at <code>/queues</code>.
        </p>
      )}
      <h2>JSON API</h2>
      <ul class="links">
        <li>
          <a href="/api/stats">/api/stats</a> — jobs per state and VO
        </li>
        <li>
          <a href="/api/jobs">/api/jobs</a> — jobs (<code>?owner=</code>, <code>?state=</code>, <code>?limit=</code>)
        </li>
        <li>
          <a href="/api/queues">/api/queues</a> — queue counts
        </li>
        <li>
          <a href="/api/drain">/api/drain</a> — whether new jobs are refused (POST sets, DELETE clears)
        </li>
      </ul>
      <h2>Documentation</h2>
      <ul class="links">
        {f.docsUrl ? (
          <li>
            <a href={f.docsUrl}>The site's documentation</a> (<code>admin.docsUrl</code>)
          </li>
        ) : (
          ""
        )}
        {f.endpointUrl ? (
          <li>
            <a href={`${f.endpointUrl.replace(/\/+$/, "")}/rest/1.1`}>The CE's pages for people</a> (with a user certificate)
          </li>
        ) : (
          ""
        )}
        {DOCS.map(([path, what]) => (
          <li>
            <code>{path}</code> in the CE's source — {what}
          </li>
        ))}
      </ul>
      {f.docsUrl ? "" : <p class="muted small">Set admin.docsUrl to link where your site publishes these documents.</p>}
    </Layout>,
  );
}

/** A browser without the admin token: how to get in, not a JSON 401. */
export function tokenHelpPage(role: Role, wrong: boolean): string {
  return renderPage(
    <Layout title="The admin token is needed" crumbs={[{ label: `admin (${role})` }]}>
      {wrong ? <p class="failure">The token given is not this listener's admin token.</p> : ""}
      <p>
        Open this address once with <code>?token=</code> and the admin token (<code>admin.token</code>, or the file{" "}
        <code>admin.tokenFile</code>; the development setup prints it): for example <code>/?token=…</code>. The browser then keeps an
        HttpOnly cookie for this listener, and the token leaves the address bar.
      </p>
      <p>
        Programs send <code>Authorization: Bearer &lt;token&gt;</code>. <a href="/healthz">/healthz</a> needs no token.
      </p>
      <p class="muted small">401 unauthorized</p>
    </Layout>,
  );
}
