import type { Context } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import type { AppEnv } from "../context.js";
import { BadRequest, Forbidden } from "../errors.js";
import { requireFullProxy, requireScope } from "../middleware/identity/scopes.js";
import { readTextBody } from "../services/body.js";
import { ACTION_SCOPE, runBulk } from "../services/bulk.js";
import { ACTION_NOTICES } from "./job.js";
import { jobHref, Layout, restBase, sendPage, trail } from "./layout.js";

/*
 * The job page's buttons: `POST <base>/jobs/<id>` with a form body `action=kill|clean|restart`.
 * The work is the bulk action's for one id (services/bulk.ts), so the record, the command queue
 * and the answer codes are the interface's: 202 when queued, 404, 409 for a refused restart.
 */

const FORM_ACTIONS = ["kill", "clean", "restart"] as const;
type FormAction = (typeof FORM_ACTIONS)[number];
const FORM_BODY_BYTES = 1024;

/**
 * Cross-site request forgery defence. Authentication is by client certificate (or a token a
 * browser never sends by itself): a browser presents the certificate on ANY request to this
 * origin, including a form another site auto-submits — exactly as it would send a cookie, but
 * with no SameSite attribute to limit it. So a state-changing form post must prove it came from
 * one of our own pages. Browsers say where a request comes from in headers a page cannot forge:
 * `Sec-Fetch-Site` (all current browsers) and `Origin` (sent on every cross-origin and every
 * form POST). A post is accepted only when one of them says same-origin and neither says
 * otherwise; a post with neither (an old browser, or a script that should use the REST bulk
 * actions instead) is refused.
 */
export function checkSameOrigin(c: Context<AppEnv>): void {
  const site = c.req.header("sec-fetch-site");
  const origin = c.req.header("origin");
  const own = new URL(c.req.url).origin;
  if (site !== undefined && site !== "same-origin") {
    throw new Forbidden(`Cross-site form post refused (Sec-Fetch-Site: ${site}); use the job page of this CE`, "CROSS_SITE_REFUSED");
  }
  if (origin !== undefined && origin !== own) {
    throw new Forbidden(`Cross-site form post refused (Origin ${origin} is not ${own}); use the job page of this CE`, "CROSS_SITE_REFUSED");
  }
  if (site === undefined && origin === undefined) {
    throw new Forbidden(
      "Form post without Origin or Sec-Fetch-Site refused; programs use POST /jobs?action=kill|clean|restart",
      "CROSS_SITE_REFUSED",
    );
  }
}

export async function postJobForm(c: Context<AppEnv>, id: string): Promise<Response> {
  checkSameOrigin(c);
  const body = await readTextBody(c, FORM_BODY_BYTES, "Form");
  const action = new URLSearchParams(body).get("action") ?? "";
  if (!(FORM_ACTIONS as readonly string[]).includes(action)) {
    throw new BadRequest(`Unknown form action ${JSON.stringify(action)}; one of ${FORM_ACTIONS.join(", ")}`, "BAD_ACTION");
  }
  const act = action as FormAction;
  requireScope(c, ACTION_SCOPE[act]);
  if (act === "restart") requireFullProxy(c, "restart jobs");
  const [item] = await runBulk(c.get("services"), act, [id], {
    identity: c.get("identity"),
    requestId: c.get("requestId"),
    log: c.get("log"),
  });
  const base = restBase(c);
  const ok = item!.statusCode === 202;
  // The answer is a page, not a redirect: a 202 is what the durability check (redis.waitReplicas)
  // holds until the request is on the replicas, and the page says what happened either way.
  const back =
    act === "clean" && ok
      ? { href: `${base}/jobs`, label: "Back to the job list" }
      : { href: `${jobHref(base, id)}${ok && ACTION_NOTICES[act] ? `?done=${act}` : ""}`, label: "Back to the job" };
  return sendPage(
    c,
    <Layout
      title={`${act[0]!.toUpperCase()}${act.slice(1)}: ${item!.reason}`}
      crumbs={trail(c, { label: "Jobs", href: `${base}/jobs` }, { label: id, href: jobHref(base, id) }, { label: act })}
    >
      <p class={ok ? "notice" : "failure"} role="status">
        {item!.statusCode} {item!.reason}
      </p>
      <p>
        <a href={back.href}>{back.label}</a>
      </p>
    </Layout>,
    item!.statusCode as ContentfulStatusCode,
  );
}
