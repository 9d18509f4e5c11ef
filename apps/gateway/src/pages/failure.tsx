import type { FailureWords } from "@ce/model";
import type { JobRecord } from "@ce/store";
import { hrefFor } from "../services/session/index.js";
import { textViewHref } from "./fileview.js";
import { bytes } from "./layout.js";
import type { StreamTail } from "./streams.js";

/*
 * The job page's "Why it failed" box: the cause in words first (failureWords, @ce/model), whose
 * failure it is, what to do, then the job's stderr and stdout: their last lines when the session
 * still has them (streams.ts), or how to keep them next time.
 */

export function FailureBox(props: { job: JobRecord; words: FailureWords; streams: StreamTail[]; sessionRoot: string }) {
  const { job, words } = props;
  return (
    <div class="failure" role="note" aria-labelledby="why">
      <h2 id="why">Why it {job.rest === "KILLED" ? "was killed" : "failed"}</h2>
      <p>
        <strong>{words.cause}</strong>
        {job.failedCause ? <span class="muted small"> ({causeText(job.failedCause)})</span> : ""}
      </p>
      {words.advice ? <p>{words.advice}</p> : ""}
      {props.streams.map((t) => (
        <StreamPart t={t} sessionRoot={props.sessionRoot} />
      ))}
    </div>
  );
}

function causeText(cause: "internal" | "client" | "user"): string {
  return cause === "user" ? "caused by the job or its limits" : cause === "client" ? "killed on request" : "a problem of the site";
}

const STREAM_LABEL = { stdout: "standard output", stderr: "standard error" } as const;
const STREAM_XRSL = { stdout: "stdout", stderr: "stderr" } as const;
const STREAM_ADL = { stdout: "Output", stderr: "Error" } as const;

/** One of stdout/stderr under the failure: its last lines, or why there are none and how to keep them. */
function StreamPart(props: { t: StreamTail; sessionRoot: string }) {
  const { t } = props;
  const label = STREAM_LABEL[t.which];
  if (!t.name)
    return (
      <p class="small">
        The description named no {label} file, so the CE has none to show. To keep it, add{" "}
        <code>
          ({STREAM_XRSL[t.which]}="{t.which}.txt")(outputfiles=("{t.which}.txt" ""))
        </code>{" "}
        in xRSL (ADL: <code>&lt;{STREAM_ADL[t.which]}&gt;</code> and an <code>&lt;OutputFile&gt;</code>).
      </p>
    );
  const href = hrefFor(props.sessionRoot, t.name.split("/"), false);
  if (t.tail === undefined)
    return (
      <p class="small">
        The {label} (<span class="mono">{t.name}</span>){" "}
        {t.kept
          ? "is not in the session directory (any more)."
          : "was removed when the job ended: it is not one of the job's output files."}{" "}
        {t.kept ? (
          ""
        ) : (
          <>
            To keep it next time, add <code>("{t.name}" "")</code> to <code>(outputfiles=…)</code> in xRSL (ADL: an{" "}
            <code>&lt;OutputFile&gt;</code> named <span class="mono">{t.name}</span>).
          </>
        )}
      </p>
    );
  return (
    <section aria-label={`Last lines of the ${label}`}>
      <h3 class="small">
        {t.cut ? `Last lines of the ${label}` : `${label[0]!.toUpperCase()}${label.slice(1)}`} (<a href={textViewHref(href)}>{t.name}</a>
        {t.size !== undefined ? `, ${bytes(t.size)}` : ""})
      </h3>
      {t.tail === "" ? <p class="muted small">(empty)</p> : <pre class="tail">{t.tail}</pre>}
    </section>
  );
}
