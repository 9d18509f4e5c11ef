import type { Context } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import type { JobRecord } from "@ce/store";
import type { AppEnv } from "../context.js";
import { BadRequest } from "../errors.js";
import { CrossSiteRefused } from "../middleware/cross-site/index.js";
import { requireFullProxy, requireScope } from "../middleware/identity/scopes.js";
import { readTextBody } from "../services/body.js";
import { ACTION_SCOPE, runBulk } from "../services/bulk.js";
import { ownedJob } from "../services/session/index.js";
import { jobHref, Layout, restBase, sendPage, trail } from "./layout.js";

/*
 * The pages' buttons: `POST <base>/jobs/<id>` with a form body `action=kill|clean|restart`, and
 * `POST <base>/jobs` with `action=kill|clean` and the selected rows' `id`s (the job list's bulk
 * actions). The work is the bulk action's (services/bulk.ts): same record, same command queue.
 *
 * What a person sees: Clean (one job or many) and a bulk Kill first answer a confirmation page
 * whose button posts again with `confirm=yes` (no script: the CSP forbids it). A done action
 * answers a short page in words that sends the browser on to the job page (or the list) with a
 * notice: a `<meta http-equiv="refresh">`, not a 303, because the durability middleware holds a
 * 2xx answer until the write is on the replicas (redis.waitReplicas) and lets a 3xx go at once.
 */

const FORM_ACTIONS = ["kill", "clean", "restart"] as const;
type FormAction = (typeof FORM_ACTIONS)[number];
const FORM_BODY_BYTES = 1024;
/** A bulk form: a page's rows (joblist PAGE_ROWS) of 36-character ids, with room to spare. */
const BULK_FORM_BYTES = 64 * 1024;
const BULK_MAX_IDS = 500;

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

/** What a done action tells the person on the page it leads to (`?done=<action>`): fixed texts only. */
export const ACTION_NOTICES: Record<string, string> = {
  kill: "Kill requested: the job is being cancelled.",
  restart: "Restart requested: the job goes back to where it failed.",
  clean: "Clean requested: the job and its files are being removed.",
  "bulk-kill": "Kill requested for the selected jobs.",
  "bulk-clean": "Clean requested for the selected jobs: they and their files are being removed.",
};

/** The notice for a `?done=` value; undefined for anything else (own keys only: not `constructor`). */
export function noticeFor(done: string | undefined): string | undefined {
  return done !== undefined && Object.hasOwn(ACTION_NOTICES, done) ? ACTION_NOTICES[done] : undefined;
}

const PAST: Record<FormAction, string> = { kill: "killed", clean: "removed", restart: "restarted" };

async function readForm(
  c: Context<AppEnv>,
  limit: number,
  allowed: readonly FormAction[],
): Promise<{ form: URLSearchParams; act: FormAction }> {
  requireProvenance(c);
  const form = new URLSearchParams(await readTextBody(c, limit, "Form"));
  const action = form.get("action") ?? "";
  if (!(allowed as readonly string[]).includes(action)) {
    throw new BadRequest(`Unknown form action ${JSON.stringify(action)}; one of ${allowed.join(", ")}`, "BAD_ACTION");
  }
  const act = action as FormAction;
  requireScope(c, ACTION_SCOPE[act]);
  if (act === "restart") requireFullProxy(c, "restart jobs");
  return { form, act };
}

const nameOf = (job: JobRecord) => job.jobName || job.id;

export async function postJobForm(c: Context<AppEnv>, id: string): Promise<Response> {
  const { form, act } = await readForm(c, FORM_BODY_BYTES, FORM_ACTIONS);
  const job = await ownedJob(c, id);
  const base = restBase(c);
  const self = jobHref(base, job.id);
  const crumbs = trail(c, { label: "Jobs", href: `${base}/jobs` }, { label: nameOf(job), href: self }, { label: act });
  // Clean cannot be undone: the first post only asks.
  if (act === "clean" && form.get("confirm") !== "yes") return confirmPage(c, act, [job], self, crumbs);
  const [item] = await runBulk(c.get("services"), act, [job.id], {
    identity: c.get("identity"),
    requestId: c.get("requestId"),
    log: c.get("log"),
  });
  if (item!.statusCode !== 202) {
    return sendPage(
      c,
      <Layout title={`The job ${nameOf(job)} was not ${PAST[act]}`} crumbs={crumbs}>
        <p class="failure" role="status">
          {item!.reason === "No more restarts allowed"
            ? "It has no restarts left."
            : item!.reason === "Job has not failed"
              ? "Only a failed job can be restarted."
              : item!.reason}
        </p>
        <p>
          <a href={self}>Back to the job</a>
        </p>
      </Layout>,
      item!.statusCode as ContentfulStatusCode,
    );
  }
  const next = act === "clean" ? `${base}/jobs?done=clean` : `${self}?done=${act}`;
  return donePage(c, ACTION_NOTICES[act]!, next, act === "clean" ? "Go to the job list" : "Back to the job", crumbs);
}

/** The job list's bulk form: `action=kill|clean` and the selected `id`s; asks first, then acts. */
export async function postBulkForm(c: Context<AppEnv>): Promise<Response> {
  const { form, act } = await readForm(c, BULK_FORM_BYTES, ["kill", "clean"]);
  const base = restBase(c);
  const list = `${base}/jobs`;
  const ids = [...new Set(form.getAll("id"))];
  if (ids.length > BULK_MAX_IDS) throw new BadRequest(`${ids.length} jobs selected; at most ${BULK_MAX_IDS} at once`, "TOO_MANY_SELECTED");
  const crumbs = trail(c, { label: "Jobs", href: list }, { label: `${act} selected` });
  const s = c.get("services");
  const owner = c.get("identity").subject;
  const jobs = (await s.jobs.getMany(ids)).filter((r): r is JobRecord => r !== undefined && r.owner === owner);
  if (jobs.length === 0) {
    return sendPage(
      c,
      <Layout title="No job selected" crumbs={crumbs}>
        <p>Tick the box of each job to {act} in the job list, then press the button again.</p>
        <p>
          <a href={list}>Back to the job list</a>
        </p>
      </Layout>,
      400,
    );
  }
  if (form.get("confirm") !== "yes") return confirmPage(c, act, jobs, list, crumbs, true);
  await runBulk(
    s,
    act,
    jobs.map((j) => j.id),
    { identity: c.get("identity"), requestId: c.get("requestId"), log: c.get("log") },
  );
  return donePage(c, ACTION_NOTICES[`bulk-${act}`]!, `${list}?done=bulk-${act}`, "Go to the job list", crumbs);
}

/** The second step: what will happen to which jobs, one button that does it, one link that does not. */
function confirmPage(
  c: Context<AppEnv>,
  act: FormAction,
  jobs: JobRecord[],
  /** Where the confirmed form posts and where "No" leads: the job page, or the list for a bulk action. */
  back: string,
  crumbs: ReturnType<typeof trail>,
  bulk = false,
) {
  const one = jobs.length === 1 ? jobs[0] : undefined;
  const what = one ? `the job ${nameOf(one)}` : `${jobs.length} jobs`;
  const title = act === "clean" ? `Remove ${what} and ${one ? "its" : "their"} files?` : `Kill ${what}?`;
  return sendPage(
    c,
    <Layout title={title} crumbs={crumbs}>
      <p>
        {act === "clean"
          ? "The job record, its session directory and its diagnose files are removed for good. This cannot be undone."
          : "Running jobs are cancelled in the batch system; jobs that already ended stay as they are."}
      </p>
      {!bulk ? (
        ""
      ) : (
        <ul class="links">
          {jobs.map((j) => (
            <li>
              {nameOf(j)} <span class="muted small">({j.rest})</span>
            </li>
          ))}
        </ul>
      )}
      <form method="post" action={back} class="actions">
        <input type="hidden" name="action" value={act} />
        <input type="hidden" name="confirm" value="yes" />
        {bulk ? jobs.map((j) => <input type="hidden" name="id" value={j.id} />) : ""}
        <button type="submit" class="danger">
          {act === "clean" ? `Yes, remove ${one ? "it" : "them"}` : `Yes, kill ${one ? "it" : "them"}`}
        </button>
        <a href={back}>No, keep {one ? "it" : "them"}</a>
      </form>
    </Layout>,
  );
}

/** An action was queued: say so, and move the browser on to where its effect shows (2xx: see above). */
function donePage(c: Context<AppEnv>, notice: string, next: string, label: string, crumbs: ReturnType<typeof trail>) {
  return sendPage(
    c,
    <Layout title={notice} crumbs={crumbs} refresh={next}>
      <p class="notice" role="status">
        {notice}
      </p>
      <p>
        <a href={next}>{label}</a>
      </p>
    </Layout>,
    202,
  );
}
