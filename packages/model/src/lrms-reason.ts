import type { LrmsState } from "./states.js";

/*
 * The batch system's own reason a job waits (Slurm `squeue %r`: `Priority`, `Resources`,
 * `QOSMaxJobsPerUserLimit`, `JobHeldAdmin`; Grid Engine's scheduling info). It travels from the
 * poll script's free text to the job record (`lrmsReason`), the info document, the pages, the
 * metric `ce_lrms_pending_jobs` and `ceadm jobs list --pending`. The text comes from a program the
 * site runs, yet it lands in XML, HTML and metric labels: it is kept to one short printable line.
 */

/** Longest reason kept; Slurm's are single words, Grid Engine's a sentence. */
export const LRMS_REASON_MAX = 160;

/** Sub-states in which a job waits for the batch system: only these carry a reason. */
export const WAITING_LRMS_STATES: ReadonlySet<LrmsState> = new Set<LrmsState>(["QUEUING", "HELD", "OTHER"]);

/**
 * The reason as stored and shown: control characters become spaces, blanks collapse, at most
 * LRMS_REASON_MAX characters; empty → undefined. Slurm's `(null)` / `None` say "no reason": undefined.
 */
export function lrmsReasonText(raw: string | undefined | null): string | undefined {
  if (!raw) return undefined;
  const text = raw
    .replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g, " ")
    .replace(/\s+/g, " ")
    .trim();
  if (text === "" || text === "None" || text === "(null)") return undefined;
  return text.length > LRMS_REASON_MAX ? `${text.slice(0, LRMS_REASON_MAX - 1)}…` : text;
}

/** The reason to show for a job: only while it waits in the batch system (INLRMS, not pending, a waiting sub-state). */
export function shownLrmsReason(r: {
  state: string;
  pending: boolean;
  lrms?: LrmsState | undefined;
  lrmsReason?: string | undefined;
}): string | undefined {
  if (r.state !== "INLRMS" || r.pending || !r.lrms || !WAITING_LRMS_STATES.has(r.lrms)) return undefined;
  return r.lrmsReason || undefined;
}
