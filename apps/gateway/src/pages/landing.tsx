import type { Context } from "hono";
import { failureWords, REST_STATES, type RestState } from "@ce/model";
import type { AppEnv } from "../context.js";
import { isDraining, vosOfRules } from "../services/info.js";
import { pendingReasons, RECENT_FAILURE_MS, recentFailures, VO_COLUMNS, type VoColumn, voCounts } from "./data.js";
import { ago, jobHref, Layout, restBase, sendPage, shortDn, StateBadge, Time, trail } from "./layout.js";

/*
 * The landing page (`<endpoint>/rest/<version>` in HTML; `<endpoint>` itself redirects here):
 * what this CE is, its queues, how busy it is per VO, the caller's own jobs and their recent
 * failures grouped by reason, and the links onwards.
 */

const VO_LABELS: Record<VoColumn, string> = {
  waiting: "Waiting in the CE",
  queued: "Queued in batch",
  running: "Running",
  finishing: "Finishing",
};

export async function landingPage(c: Context<AppEnv>): Promise<Response> {
  const s = c.get("services");
  const { config } = s;
  const owner = c.get("identity").subject;
  const base = restBase(c);
  const now = Date.now();
  const [draining, byRest, vos, mine, failures, pending] = await Promise.all([
    isDraining(s),
    s.jobs.countByRest(REST_STATES),
    voCounts(s, now),
    s.jobs.list(owner, REST_STATES),
    recentFailures(s, owner, now),
    pendingReasons(s, now),
  ]);
  const host = new URL(config.endpoint.url).hostname;
  const myByState = new Map<RestState, number>();
  for (const j of mine) if (j.state) myByState.set(j.state, (myByState.get(j.state) ?? 0) + 1);
  const sum = (states: readonly RestState[]) => states.reduce((a, st) => a + (byRest[st] ?? 0), 0);
  const voRows = vos.byVo ? [...vos.byVo.entries()].sort(([a], [b]) => (a < b ? -1 : 1)) : [];
  const cols = Object.keys(VO_COLUMNS) as VoColumn[];

  return sendPage(
    c,
    <Layout title={`Computing element ${host}`} crumbs={trail(c)}>
      <p>
        {draining ? <strong>Draining: new jobs are refused.</strong> : "Accepting new jobs."} Batch system: {config.lrms.backend}. Signed in
        as <span title={owner}>{shortDn(owner)}</span>.
      </p>
      <nav aria-label="Main">
        <ul class="links">
          <li>
            <a href={`${base}/jobs`}>Your jobs</a> ({mine.length})
          </li>
          <li>
            <a href={`${base}/info`}>Computing element information (GLUE2)</a>
          </li>
          <li>
            <a href={`${base}/delegations`}>Your delegations</a>
          </li>
          <li>
            <a href={`${config.mountPath}/rest`}>REST interface versions</a>
          </li>
        </ul>
      </nav>

      <h2>Your jobs</h2>
      {mine.length === 0 ? (
        <p class="muted">You have no jobs here.</p>
      ) : (
        <ul class="inline">
          {REST_STATES.filter((st) => myByState.has(st)).map((st) => (
            <li>
              <a href={`${base}/jobs?state=${st}`}>
                <StateBadge state={st} /> {myByState.get(st)}
              </a>
            </li>
          ))}
        </ul>
      )}

      <h2>Your recent failures</h2>
      {failures.length === 0 ? (
        <p class="muted">None in the last {Math.round(RECENT_FAILURE_MS / 86_400_000)} days.</p>
      ) : (
        <div class="scroll">
          <table>
            <thead>
              <tr>
                <th scope="col" class="num">
                  Jobs
                </th>
                <th scope="col">Reason</th>
                <th scope="col">Latest</th>
              </tr>
            </thead>
            <tbody>
              {failures.map((g) => (
                <tr>
                  <td class="num">{g.count}</td>
                  <td>{failureWords(g.example).cause}</td>
                  <td>
                    <a href={jobHref(base, g.newest.id)}>{g.newest.jobName || g.newest.id}</a>
                    <div class="muted small">{ago(now - (g.newest.endedAt ?? g.newest.stateSince))}</div>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}

      <h2>Queues</h2>
      <div class="scroll">
        <table>
          <thead>
            <tr>
              <th scope="col">Queue</th>
              <th scope="col">Admits</th>
              <th scope="col">Wall time (max)</th>
            </tr>
          </thead>
          <tbody>
            {config.jobs.queues.map((q) => (
              <tr>
                <td class="mono">{q.name}</td>
                <td>
                  {q.allow.length === 0 ? "everyone the CE admits" : (vosOfRules(q.allow)?.map((v) => `VO ${v}`) ?? q.allow).join(", ")}
                </td>
                <td>{q.maxWallTimeSeconds !== undefined ? `${Math.round(q.maxWallTimeSeconds / 60)} min` : "–"}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>

      <h2>Jobs on this CE by VO</h2>
      {voRows.length === 0 ? (
        <p class="muted">No active jobs.</p>
      ) : (
        <div class="scroll">
          <table>
            <thead>
              <tr>
                <th scope="col">VO</th>
                {cols.map((k) => (
                  <th scope="col" class="num">
                    {VO_LABELS[k]}
                  </th>
                ))}
              </tr>
            </thead>
            <tbody>
              {voRows.map(([vo, row]) => (
                <tr>
                  <td class="mono">{vo}</td>
                  {cols.map((k) => (
                    <td class="num">{row[k]}</td>
                  ))}
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <h2>Why jobs wait in the batch system</h2>
      {pending.length === 0 ? (
        <p class="muted">No job is waiting in the batch system.</p>
      ) : (
        <div class="scroll">
          <table>
            <thead>
              <tr>
                <th scope="col">Queue</th>
                <th scope="col">VO</th>
                <th scope="col">Reason (as the batch system states it)</th>
                <th scope="col" class="num">
                  Jobs
                </th>
              </tr>
            </thead>
            <tbody>
              {pending.map((p) => (
                <tr>
                  <td class="mono">{p.queue}</td>
                  <td class="mono">{p.vo || "(none)"}</td>
                  <td class="mono">{p.reason}</td>
                  <td class="num">{p.jobs}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <p class="small">
        All VOs: {cols.map((k) => `${VO_LABELS[k]} ${sum(VO_COLUMNS[k])}`).join(", ")}; finished, failed or killed and still kept{" "}
        {sum(["FINISHED", "FAILED", "KILLED"])}. Counted <Time ms={now} now={now} />.
      </p>
    </Layout>,
  );
}
