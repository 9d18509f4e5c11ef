import type { Context } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import type { AppEnv } from "../context.js";
import { BadRequest } from "../errors.js";
import { CrossSiteRefused } from "../middleware/cross-site/index.js";
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
 * The cross-site rule itself (another site's `Origin` or `Sec-Fetch-Site`) is the middleware's,
 * for every route (middleware/cross-site). What is left here is the buttons' own, stricter part:
 * this route exists only for a browser's form, and every browser that can show the pages sends
 * `Origin` on a form post (and every current one `Sec-Fetch-Site`). A form post that names neither
 * cannot show where it came from — an old browser, or a program that should use the REST bulk
 * actions — so it is refused. (REST routes let such requests pass: programs send neither header,
 * and a browser form cannot reach them since they refuse the form encodings: services/body.ts.)
 */
export function requireProvenance(c: Context<AppEnv>): void {
  if (c.req.header("sec-fetch-site") === undefined && c.req.header("origin") === undefined) {
    throw new CrossSiteRefused(
      "Form post without Origin or Sec-Fetch-Site refused: it cannot show it comes from this CE's job page; programs use POST /jobs?action=kill|clean|restart",
    );
  }
}

export async function postJobForm(c: Context<AppEnv>, id: string): Promise<Response> {
  requireProvenance(c);
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
