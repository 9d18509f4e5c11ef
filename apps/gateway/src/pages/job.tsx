import type { Context } from "hono";
import type { Child } from "hono/jsx";
import { FINAL_REST_STATES, failureWords, parseTokenOwner, secondsInWords, shownLrmsReason, stateInWords } from "@ce/model";
import type { JobRecord } from "@ce/store";
import type { AppEnv } from "../context.js";
import { restartRefusal } from "../services/bulk.js";
import { listCapped, ListingTooLarge } from "../services/session/index.js";
import { openTarget, SessionFsError } from "../services/session/index.js";
import { hrefFor } from "../services/session/index.js";
import { noticeFor } from "./actions.js";
import { type DiagnoseEntry, diagnoseEntries, jobHistory, voOf } from "./data.js";
import { downloadHref, textViewHref } from "./fileview.js";
import { bytes, jobHref, Layout, restBase, sendPage, shortDn, StateBadge, Time, trail, when } from "./layout.js";
import { FailureBox } from "./failure.js";
import { specFacts, streamTails } from "./streams.js";

/*
 * The job page (`GET <base>/jobs/<id>` in HTML; JSON and XML clients still get 404
 * MISSING_SUBRESOURCE there) and the diagnose index (`<base>/jobs/<id>/diagnose` in HTML).
 */

/** Entries of the session directory shown on the job page; the listing itself has them all. */
const FILES_SHOWN = 200;

interface SessionFiles {
  entries: { name: string; dir: boolean; size: number; mtimeMs: number }[];
  /** Why there is no listing (wiped, deleted, too large, not readable). */
  note?: string | undefined;
}

async function sessionFiles(c: Context<AppEnv>, job: JobRecord): Promise<SessionFiles> {
  if (job.state === "DELETED") return { entries: [], note: "The session directory was removed after its lifetime expired." };
  const s = c.get("services");
  let target;
  try {
    target = await openTarget(s.control.sessionDir(job.id), []);
  } catch (e) {
    if (e instanceof SessionFsError)
      return {
        entries: [],
        note: e.kind === "missing" ? "There is no session directory." : "The session directory cannot be read by the CE.",
      };
    throw e;
  }
  if (target.kind !== "dir") {
    await target.handle.close();
    return { entries: [], note: "The session directory is not a directory." };
  }
  try {
    const { files, dirs } = await listCapped(target.dir, "/", s.config.gateway.limits.listingEntries);
    const entries = [
      ...dirs.map((d) => ({ name: d.name, dir: true, size: 0, mtimeMs: d.stat.mtimeMs })),
      ...files.map((f) => ({ name: f.name, dir: false, size: f.stat.size, mtimeMs: f.stat.mtimeMs })),
    ];
    return { entries };
  } catch (e) {
    if (e instanceof ListingTooLarge) return { entries: [], note: e.message };
    throw e;
  } finally {
    await target.dir.close();
  }
}

/** Why Restart is not offered, in words (services/bulk.ts restartRefusal says it for programs). */
function restartWhyNot(job: JobRecord): string {
  if (job.state !== "FINISHED" || job.outcome !== "failed") return "Restart is offered for failed jobs only.";
  if (job.rerun <= 0) return "Restart is not offered: the job has no restarts left (xRSL (rerun=N) allows N).";
  return "Restart is not offered for this job.";
}

export async function jobPage(c: Context<AppEnv>, job: JobRecord): Promise<Response> {
  const base = restBase(c);
  const now = Date.now();
  const s = c.get("services");
  const [history, diagnose, files, spec] = await Promise.all([
    jobHistory(s, job.id),
    diagnoseEntries(s, job.id),
    sessionFiles(c, job),
    specFacts(s, job.id),
  ]);
  const streams = job.failure ? await streamTails(s, job, spec) : [];
  const words = job.failure ? failureWords(job.failure, { usedMemoryMB: job.usedMemoryMB, requestedMemoryMB: spec.memoryMB }) : undefined;
  const self = jobHref(base, job.id);
  const name = job.jobName || job.id;
  const sessionRoot = `${self}/session`;
  const notice = noticeFor(c.req.query("done"));
  const canKill = !FINAL_REST_STATES.has(job.rest) && job.state !== "CANCELING";
  const canRestart = restartRefusal(job) === undefined;
  const token = parseTokenOwner(job.owner);
  const facts: [string, Child][] = [
    ["Job id", <span class="mono">{job.id}</span>],
    [
      "State",
      <>
        <StateBadge state={job.rest} /> <span class="muted small">since {when(job.stateSince)}</span>
      </>,
    ],
    // The batch system's own words for why the job waits (Slurm %r, Grid Engine scheduling info).
    ["Waiting in the batch system because", shownLrmsReason(job) ?? ""],
    ["Queue", job.queue],
    ["Owner", <span class="mono">{job.owner}</span>],
    // A token job: who issued the token and to whom, as the usage record has them.
    ...(token
      ? ([
          ["Token issuer", <span class="mono">{token.iss}</span>],
          ["Token subject", <span class="mono">{token.sub}</span>],
        ] as [string, Child][])
      : []),
    ["VO", job.fqans?.length ? voOf(job.fqans) : ""],
    ["Local account", job.localUser?.account ?? ""],
    ["Groups (VOMS / token)", job.fqans?.join(", ") ?? ""],
    ["Submitted", <Time ms={job.created} now={now} />],
    ["Started", <Time ms={job.startedAt} now={now} />],
    ["Ended", <Time ms={job.endedAt} now={now} />],
    ["Exit code", job.exitCode ?? ""],
    ["Batch id", job.localId ?? ""],
    ["Nodes", job.nodes ?? ""],
    ["Wall time used", job.usedWallSeconds !== undefined ? secondsInWords(job.usedWallSeconds) : ""],
    ["CPU time used", job.usedCpuSeconds !== undefined ? secondsInWords(job.usedCpuSeconds) : ""],
    ["Memory used", job.usedMemoryMB !== undefined ? `${Math.round(job.usedMemoryMB)} MB` : ""],
    ["Memory asked for", spec.memoryMB !== undefined ? `${Math.round(spec.memoryMB)} MB` : ""],
    ["Waiting for uploads", job.awaiting ? `${job.awaiting} (until ${when(job.uploadDeadline)})` : ""],
    ["Restarts left", job.rerun],
    ["Credential expires (proxy / token)", <Time ms={job.delegationExpires} now={now} />],
    ["Session removed", job.cleanupAt ? <Time ms={job.cleanupAt} now={now} /> : ""],
  ];

  return sendPage(
    c,
    <Layout title={`Job ${name}`} crumbs={trail(c, { label: "Jobs", href: `${base}/jobs` }, { label: name })}>
      {notice ? (
        <p class="notice" role="status">
          {notice}
        </p>
      ) : (
        ""
      )}
      {words ? <FailureBox job={job} words={words} streams={streams} sessionRoot={sessionRoot} /> : ""}
      <p>
        <a href={`${sessionRoot}/`}>Session files</a> · <a href={`${self}/diagnose`}>Diagnose files</a> ·{" "}
        <a href={`${self}/diagnose/errors`}>State log (errors)</a> · <a href={`${self}/diagnose/xml`}>GLUE2 activity (XML)</a>
      </p>
      <h2 id="actions">Actions</h2>
      <div class="actions">
        {canKill ? <ActionForm action={self} name="kill" label="Kill" /> : ""}
        {canRestart ? <ActionForm action={self} name="restart" label="Restart" /> : ""}
        <ActionForm action={self} name="clean" label="Clean (remove the job and its files)" danger />
      </div>
      {!canRestart && job.rest !== "WIPED" ? <p class="muted small">{restartWhyNot(job)}</p> : ""}
      <h2>Details</h2>
      <dl class="kv">
        {facts
          .filter(([, v]) => v !== "" && v !== undefined)
          .map(([k, v]) => (
            <>
              <dt>{k}</dt>
              <dd>{v}</dd>
            </>
          ))}
      </dl>
      <h2>State history</h2>
      {history.cut ? (
        <p class="muted small">
          Earlier lines are in the full <a href={`${self}/diagnose/errors`}>errors</a> file.
        </p>
      ) : (
        ""
      )}
      {history.entries.length === 0 ? (
        <p class="muted">No state changes recorded yet.</p>
      ) : (
        <div class="scroll">
          <table>
            <thead>
              <tr>
                <th scope="col">Time (UTC)</th>
                <th scope="col">Change</th>
                <th scope="col">Reason</th>
              </tr>
            </thead>
            <tbody>
              {history.entries.map((e) => (
                <tr>
                  <td class="small">{e.at.replace("T", " ")}</td>
                  <td class="state">{e.from ? `${stateInWords(e.from)} → ${stateInWords(e.to ?? "", e.text)}` : ""}</td>
                  <td>{e.text}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <h2>Files</h2>
      {files.note ? (
        <p class="muted">{files.note}</p>
      ) : (
        <FileTable entries={files.entries.slice(0, FILES_SHOWN)} href={(e) => hrefFor(sessionRoot, [e.name], e.dir)} now={now} />
      )}
      {files.entries.length > 0 ? (
        <p>
          <a href={`${sessionRoot}/?download=tar`} download>
            Download all (tar)
          </a>{" "}
          <span class="muted">every file of the session directory in one archive</span>
        </p>
      ) : (
        ""
      )}
      {files.entries.length > FILES_SHOWN ? (
        <p>
          <a href={`${sessionRoot}/`}>All {files.entries.length} entries</a>
        </p>
      ) : (
        ""
      )}
      <h2>Diagnose files</h2>
      <DiagnoseTable entries={diagnose} href={(t) => `${self}/diagnose/${t}`} now={now} />
    </Layout>,
  );
}

function ActionForm(props: { action: string; name: "kill" | "clean" | "restart"; label: string; danger?: boolean }) {
  // A POST with a same-origin check on the server (middleware/cross-site, pages/actions.tsx); never a link a GET could trigger.
  return (
    <form method="post" action={props.action}>
      <input type="hidden" name="action" value={props.name} />
      <button type="submit" class={props.danger ? "danger" : undefined}>
        {props.label}
      </button>
    </form>
  );
}

export interface FileEntry {
  name: string;
  dir: boolean;
  size: number;
  mtimeMs: number;
}

export function FileTable(props: { entries: FileEntry[]; href: (e: FileEntry) => string; now: number; parent?: string | undefined }) {
  if (props.entries.length === 0 && props.parent === undefined) return <p class="muted">The directory is empty.</p>;
  return (
    <div class="scroll">
      <table>
        <thead>
          <tr>
            <th scope="col">Name</th>
            <th scope="col" class="num">
              Size
            </th>
            <th scope="col">Modified</th>
            <th scope="col">
              <span class="visually-hidden">Download</span>
            </th>
          </tr>
        </thead>
        <tbody>
          {props.parent !== undefined ? (
            <tr>
              <td colspan={4}>
                <a href={props.parent} rel="up">
                  .. (parent directory)
                </a>
              </td>
            </tr>
          ) : (
            ""
          )}
          {props.entries.map((e) => (
            <tr>
              <td class="mono">
                <a href={e.dir ? props.href(e) : textViewHref(props.href(e))}>{e.name}</a>
                {e.dir ? "/" : ""}
              </td>
              <td class="num" title={e.dir ? undefined : `${e.size} bytes`}>
                {e.dir ? "" : bytes(e.size)}
              </td>
              <td>
                <Time ms={e.mtimeMs} now={props.now} />
              </td>
              <td>
                {e.dir ? (
                  ""
                ) : (
                  <a href={downloadHref(props.href(e))} aria-label={`Download ${e.name}`}>
                    Download
                  </a>
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

const DIAGNOSE_TEXT: Record<string, string> = {
  failed: "why the job failed",
  local: "the job's local settings",
  errors: "state changes and messages",
  description: "the job description as submitted",
  diag: "resource usage from the batch system",
  comment: "comments",
  status: "current state",
  acl: "access rules",
  xml: "GLUE2 activity document",
  input: "input files",
  output: "output files",
  input_status: "uploaded input files",
  output_status: "delivered output files",
  statistics: "transfer statistics",
};

export function DiagnoseTable(props: { entries: DiagnoseEntry[]; href: (type: string) => string; now: number }) {
  return (
    <div class="scroll">
      <table>
        <thead>
          <tr>
            <th scope="col">File</th>
            <th scope="col">Holds</th>
            <th scope="col" class="num">
              Size
            </th>
            <th scope="col">Modified</th>
          </tr>
        </thead>
        <tbody>
          {props.entries.map((e) => (
            <tr>
              <td class="mono">
                <a href={props.href(e.type)}>{e.type}</a>
              </td>
              <td>{DIAGNOSE_TEXT[e.type] ?? ""}</td>
              <td class="num">{e.size === undefined ? <span class="muted small">made on request</span> : bytes(e.size)}</td>
              <td>{e.mtimeMs === undefined ? "" : <Time ms={e.mtimeMs} now={props.now} />}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

export async function diagnoseIndexPage(c: Context<AppEnv>, job: JobRecord): Promise<Response> {
  const base = restBase(c);
  const self = jobHref(base, job.id);
  const name = job.jobName || job.id;
  const entries = await diagnoseEntries(c.get("services"), job.id);
  return sendPage(
    c,
    <Layout
      title={`Diagnose files of ${name}`}
      crumbs={trail(c, { label: "Jobs", href: `${base}/jobs` }, { label: name, href: self }, { label: "diagnose" })}
    >
      <p>
        Control files the CE keeps for this job of {shortDn(job.owner)} (<StateBadge state={job.rest} />
        ). <a href={`${self}/session/`}>Session files</a>
      </p>
      <DiagnoseTable entries={entries} href={(t) => `${self}/diagnose/${t}`} now={Date.now()} />
    </Layout>,
  );
}
