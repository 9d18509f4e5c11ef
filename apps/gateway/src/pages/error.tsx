import type { Context } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import type { AppEnv } from "../context.js";
import { Layout, restBase, sendPage, trail } from "./layout.js";

/**
 * A whole-request failure for a browser (render.ts renderError, HTML negotiated), in the pages'
 * frame: the reason as the heading, what a person can do next, and the status and error code
 * small, for a message to the site. The headers (X-Error-Code, Allow, Retry-After …) are the
 * error's, set by the caller. A 401 explains how to give the browser a grid certificate.
 */
export function errorPage(
  c: Context<AppEnv>,
  status: ContentfulStatusCode,
  _title: string,
  reason: string,
  headers: Record<string, string>,
): Response {
  const framed = c.get("services") !== undefined;
  const crumbs = framed ? trail(c, { label: "Error" }) : [{ label: "Error" }];
  const base = framed ? restBase(c) : undefined;
  const title = reason.length > 120 ? `${reason.slice(0, 119)}…` : reason;
  return sendPage(
    c,
    <Layout title={title} crumbs={crumbs}>
      {title !== reason ? <p class="failure">{reason}</p> : ""}
      {status === 401 ? <CertificateHelp /> : ""}
      {base ? (
        <p>
          Go on from <a href={base}>the CE's start page</a> or <a href={`${base}/jobs`}>your jobs</a>.
        </p>
      ) : (
        ""
      )}
      <p class="muted small">
        HTTP status {status}
        {headers["X-Error-Code"] ? `, error code ${headers["X-Error-Code"]}` : ""}: quote these when you write to the site.
      </p>
    </Layout>,
    status,
    headers,
  );
}

const OPENSSL_P12 =
  'openssl pkcs12 -export -in ~/.globus/usercert.pem -inkey ~/.globus/userkey.pem \\\n  -name "grid certificate" -out ~/usercert.p12';

/** How a person gets their grid certificate into a browser (the CE authenticates by TLS client certificate). */
function CertificateHelp() {
  return (
    <section aria-labelledby="cert-help">
      <h2 id="cert-help">Use your grid certificate in the browser</h2>
      <p>
        The CE knows you by your grid (X.509) certificate, which the browser presents when it connects. Browsers import it as one PKCS#12
        file (<code>.p12</code>) holding the certificate and its key.
      </p>
      <ol>
        <li>
          Make the <code>.p12</code> from the files the ARC client uses (it asks for your key's pass phrase, then for a password to protect
          the new file):
          <pre class="tail">{OPENSSL_P12}</pre>
        </li>
        <li>
          <strong>Firefox</strong>: Settings → Privacy &amp; Security → Certificates → View Certificates… → Your Certificates → Import…,
          choose <code>usercert.p12</code> and enter its password.
        </li>
        <li>
          <strong>Chrome, Chromium, Edge</strong>: Settings → Privacy and security → Security → Manage certificates → Your certificates (on
          Windows: Personal) → Import, choose <code>usercert.p12</code> and enter its password. On macOS, open the file to add it to the
          login keychain instead.
        </li>
        <li>Close every window of the browser, open this page again, and choose the certificate when the browser asks.</li>
      </ol>
      <p class="small">
        The certificate's subject must be allowed on this CE (ask the site); a proxy certificate from <code>arcproxy</code> is not needed
        for the pages.
      </p>
    </section>
  );
}
