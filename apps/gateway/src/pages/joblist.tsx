import type { Context } from "hono";
import { failureWords, REST_STATES, type RestState } from "@ce/model";
import type { AppEnv } from "../context.js";
import { BadRequest } from "../errors.js";
import { type JobRow, ownerJobs, TABLE_READ_CAP } from "./data.js";
import { noticeFor } from "./actions.js";
import { jobHref, Layout, restBase, sendPage, shortDn, StateBadge, Time, trail, when } from "./layout.js";

/*
 * The job list for people (`GET <base>/jobs` answered in HTML): a table of the caller's jobs,
 * filtered by state (the interface's own `state` parameter) and sorted on the server with `sort`
 * and `order`, a page of PAGE_ROWS at a time (`page`), searched by name (`name`, any case), and
 * reloaded every AUTO_REFRESH_S seconds when `refresh=on`. Links and forms: no script. The rows
 * sit in one POST form whose checkboxes select jobs for the bulk Kill and Clean (pages/actions.tsx
 * asks for confirmation first).
 */

/** Seconds between reloads of an auto-refreshing list (opt-in: a page that reloads by itself is a surprise). */
export const AUTO_REFRESH_S = 30;
/** Characters of a failure shown in the Reason column; the job page has it whole. */
const REASON_CHARS = 140;
/** Characters of a name search. */
const NAME_SEARCH_MAX = 200;

const SORTS = {
  submitted: (r: JobRow) => r.created,
  changed: (r: JobRow) => r.stateSince,
  name: (r: JobRow) => (r.jobName ?? "").toLowerCase(),
  state: (r: JobRow) => REST_STATES.indexOf(r.rest),
  exit: (r: JobRow) => r.exitCode ?? Number.NEGATIVE_INFINITY,
} as const;
type SortKey = keyof typeof SORTS;
const COLUMNS: { key: SortKey | "owner"; label: string; num?: boolean }[] = [
  { key: "name", label: "Name" },
  { key: "state", label: "State" },
  { key: "owner", label: "Owner" },
  { key: "submitted", label: "Submitted" },
  { key: "changed", label: "Last change" },
  { key: "exit", label: "Exit code", num: true },
];

/** The Reason cell: why a job failed (cause only, in words), or what a waiting job waits for. */
function reasonText(r: JobRow, now: number): string {
  if (r.failure) {
    const cause = failureWords(r.failure).cause;
    return cause.length > REASON_CHARS ? `${cause.slice(0, REASON_CHARS - 1)}…` : cause;
  }
  if (r.awaiting && r.rest === "PREPARING") {
    // Past the deadline the JEM fails the job at its next look: the wait is over, whatever the row says.
    if (r.uploadDeadline !== undefined && r.uploadDeadline <= now) return "upload deadline passed: the job fails";
    return `waiting for upload of ${r.awaiting}${r.uploadDeadline !== undefined ? ` until ${when(r.uploadDeadline)}` : ""}`;
  }
  return "";
}
export const PAGE_ROWS = 200;

export interface ListQuery {
  states?: RestState[] | undefined;
  name?: string | undefined;
  refresh: boolean;
  sort: SortKey;
  order: "asc" | "desc";
  page: number;
}

/** The page's own parameters; a bad value is a 400 naming it, like every other parameter. */
export function parseListQuery(c: Context<AppEnv>, states: RestState[] | undefined): ListQuery {
  const sort = c.req.query("sort") || "submitted";
  if (!(sort in SORTS)) throw new BadRequest(`Unknown sort ${JSON.stringify(sort)}; one of ${Object.keys(SORTS).join(", ")}`, "BAD_SORT");
  const order = c.req.query("order") || (sort === "name" || sort === "state" ? "asc" : "desc");
  if (order !== "asc" && order !== "desc") throw new BadRequest(`Unknown order ${JSON.stringify(order)}; asc or desc`, "BAD_SORT");
  const rawPage = c.req.query("page") || "1";
  if (!/^[1-9][0-9]{0,5}$/.test(rawPage))
    throw new BadRequest(`page must be a positive integer, got ${JSON.stringify(rawPage)}`, "BAD_PAGE");
  const name = (c.req.query("name") ?? "").trim();
  if (name.length > NAME_SEARCH_MAX) throw new BadRequest(`name search longer than ${NAME_SEARCH_MAX} characters`, "BAD_NAME");
  const refresh = c.req.query("refresh") ?? "";
  if (refresh !== "" && refresh !== "on") throw new BadRequest(`refresh must be "on", got ${JSON.stringify(refresh)}`, "BAD_REFRESH");
  // The form's "all" sends `state=` (an empty list for programs): all states here.
  return {
    states: states?.length ? states : undefined,
    name: name || undefined,
    refresh: refresh === "on",
    sort: sort as SortKey,
    order,
    page: Number(rawPage),
  };
}

export function sortRows(rows: JobRow[], sort: SortKey, order: "asc" | "desc"): JobRow[] {
  const key = SORTS[sort];
  const dir = order === "asc" ? 1 : -1;
  // Ties (same name, state ...) keep the newest first, so the order is stable across reloads.
  return [...rows].sort((a, b) => {
    const x = key(a);
    const y = key(b);
    return (x < y ? -dir : x > y ? dir : 0) || b.created - a.created || (a.id < b.id ? -1 : 1);
  });
}

export async function jobListPage(c: Context<AppEnv>, q: ListQuery): Promise<Response> {
  const owner = c.get("identity").subject;
  const data = await ownerJobs(c.get("services"), owner, q.states, q.name);
  const base = restBase(c);
  const now = Date.now();
  const rows = sortRows(data.rows, q.sort, q.order);
  const pages = Math.max(1, Math.ceil(rows.length / PAGE_ROWS));
  const page = Math.min(q.page, pages);
  const shown = rows.slice((page - 1) * PAGE_ROWS, page * PAGE_ROWS);
  const href = (over: Partial<{ state: string; sort: string; order: string; page: number; refresh: boolean }>) => {
    const p = new URLSearchParams();
    const state = over.state ?? q.states?.join(",");
    if (state) p.set("state", state);
    if (q.name) p.set("name", q.name);
    if (over.refresh ?? q.refresh) p.set("refresh", "on");
    p.set("sort", over.sort ?? q.sort);
    p.set("order", over.order ?? q.order);
    if ((over.page ?? 1) > 1) p.set("page", String(over.page));
    return `${base}/jobs?${p}`;
  };
  const filterLabel = `${q.states ? q.states.join(", ") : "all states"}${q.name ? `, name containing "${q.name}"` : ""}`;
  const notice = noticeFor(c.req.query("done"));
  const self = href({ page });
  const present = REST_STATES.filter((st) => (data.byState[st] ?? 0) > 0);

  return sendPage(
    c,
    <Layout
      title={`Jobs (${filterLabel})`}
      crumbs={trail(c, { label: "Jobs" })}
      autoRefresh={q.refresh ? { seconds: AUTO_REFRESH_S, url: self } : undefined}
    >
      {notice ? (
        <p class="notice" role="status">
          {notice}
        </p>
      ) : (
        ""
      )}
      <p class="actions">
        <a href={self}>Refresh now</a>
        {q.refresh ? (
          <span>
            Reloads every {AUTO_REFRESH_S} s · <a href={href({ page, refresh: false })}>Stop reloading</a>
          </span>
        ) : (
          <a href={href({ page, refresh: true })}>Reload every {AUTO_REFRESH_S} s</a>
        )}
      </p>
      <p>
        {data.total} job{data.total === 1 ? "" : "s"} of {shortDn(owner)}; {data.selected} in {filterLabel}.
        {data.selected > data.rows.length ? ` Only the newest ${TABLE_READ_CAP} of them are listed; filter by state to see others.` : ""}
      </p>
      <nav aria-label="Filter by state">
        <ul class="inline">
          <li>{q.states ? <a href={href({ state: "" })}>All ({data.total})</a> : <strong>All ({data.total})</strong>}</li>
          {present.map((st) => (
            <li>
              {q.states?.length === 1 && q.states[0] === st ? (
                <strong>
                  {st} ({data.byState[st]})
                </strong>
              ) : (
                <a href={href({ state: st })}>
                  {st} ({data.byState[st]})
                </a>
              )}
            </li>
          ))}
        </ul>
      </nav>
      <form class="filter" method="get" action={`${base}/jobs`} role="search">
        <label>
          Name contains
          <input type="search" name="name" value={q.name ?? ""} maxlength={NAME_SEARCH_MAX} />
        </label>
        <label>
          State
          <select name="state">
            <option value="" selected={!q.states}>
              all
            </option>
            {REST_STATES.map((st) => (
              <option value={st} selected={q.states?.length === 1 && q.states[0] === st}>
                {st}
              </option>
            ))}
          </select>
        </label>
        <label>
          Sort by
          <select name="sort">
            {Object.keys(SORTS).map((k) => (
              <option value={k} selected={k === q.sort}>
                {k}
              </option>
            ))}
          </select>
        </label>
        <label>
          Order
          <select name="order">
            <option value="desc" selected={q.order === "desc"}>
              descending
            </option>
            <option value="asc" selected={q.order === "asc"}>
              ascending
            </option>
          </select>
        </label>
        {q.refresh ? <input type="hidden" name="refresh" value="on" /> : ""}
        <button type="submit">Show</button>
      </form>
      {shown.length === 0 ? (
        <p class="muted">No jobs.</p>
      ) : (
        <form method="post" action={`${base}/jobs`} aria-label="Selected jobs">
          <div class="actions">
            <button type="submit" name="action" value="kill">
              Kill selected
            </button>
            <button type="submit" name="action" value="clean" class="danger">
              Clean selected
            </button>
            <span class="muted small">Both ask before they act.</span>
          </div>
          <div class="scroll">
            <table>
              <thead>
                <tr>
                  <th scope="col">
                    <span class="visually-hidden">Select</span>
                  </th>
                  {COLUMNS.map((col) => {
                    // Narrow screens leave out what every row shares (the owner is the caller).
                    if (col.key === "owner")
                      return (
                        <th scope="col" class="wide-only">
                          {col.label}
                        </th>
                      );
                    const active = col.key === q.sort;
                    const next =
                      active && q.order === "desc" ? "asc" : active ? "desc" : col.key === "name" || col.key === "state" ? "asc" : "desc";
                    return (
                      <th
                        scope="col"
                        class={col.num ? "num" : undefined}
                        aria-sort={active ? (q.order === "asc" ? "ascending" : "descending") : undefined}
                      >
                        <a href={href({ sort: col.key, order: next })}>
                          {col.label}
                          {active ? (q.order === "asc" ? " ▲" : " ▼") : ""}
                        </a>
                      </th>
                    );
                  })}
                  <th scope="col">Reason</th>
                  <th scope="col">Files</th>
                </tr>
              </thead>
              <tbody>
                {shown.map((r) => (
                  <tr>
                    <td>
                      <input type="checkbox" name="id" value={r.id} aria-label={`select ${r.jobName || r.id}`} />
                    </td>
                    <td>
                      <a href={jobHref(base, r.id)}>{r.jobName || r.id}</a>
                      {r.jobName ? <div class="mono muted small wide-only">{r.id}</div> : ""}
                    </td>
                    <td>
                      <StateBadge state={r.rest} />
                    </td>
                    <td title={r.owner} class="wide-only">
                      {shortDn(r.owner)}
                    </td>
                    <td>
                      <Time ms={r.created} now={now} />
                    </td>
                    <td>
                      <Time ms={r.stateSince} now={now} />
                    </td>
                    <td class="num">{r.exitCode ?? ""}</td>
                    <td class="reason small">{reasonText(r, now)}</td>
                    <td>
                      {r.rest === "WIPED" ? (
                        <span class="muted">removed</span>
                      ) : (
                        <a href={`${jobHref(base, r.id)}/session/`} aria-label={`files of ${r.jobName || r.id}`}>
                          files
                        </a>
                      )}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        </form>
      )}
      {pages > 1 ? (
        <nav aria-label="Pages">
          <ul class="inline">
            {page > 1 ? (
              <li>
                <a href={href({ page: page - 1 })}>← previous</a>
              </li>
            ) : (
              ""
            )}
            <li>
              page {page} of {pages}
            </li>
            {page < pages ? (
              <li>
                <a href={href({ page: page + 1 })}>next →</a>
              </li>
            ) : (
              ""
            )}
          </ul>
        </nav>
      ) : (
        ""
      )}
    </Layout>,
  );
}
