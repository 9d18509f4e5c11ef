import type { ControlFile } from "./controldir.js";

/**
 * Who writes each per-job control file, as code: the modules (source files, relative to the
 * repository root) that may write it and how, its mode, who reads it and whether diagnose serves
 * it. writers.test.ts scans every source of apps/ and packages/ and fails when a module writes a
 * control file it is not listed for here, or when an entry here no longer matches a write.
 *
 * How a module writes is the ControlDir method it calls with the file's name (controldir.ts):
 * `create` (a new file, O_EXCL: only at creation), `write` (whole-file replace by rename), `append`
 * (O_APPEND lines), `remove`. The rule between the processes: the gateway creates files before the
 * job has a record, and afterwards only appends (`input_status`); every rewrite after the commit
 * is the JEM's.
 */
export type WriteKind = "create" | "write" | "append" | "remove";

export interface ControlFileSpec {
  /** Module → the ways it writes the file. Empty: nothing in the sources writes it. */
  writers: Readonly<Record<string, readonly WriteKind[]>>;
  /** A writer outside the TypeScript sources (the batch job's wrapper script), which the scan cannot see. */
  batchJob?: string;
  /** Permission bits the file is written with. */
  mode: number;
  /** Who reads it. */
  readers: string;
  /** `file`: diagnose serves the file as stored; `rendered`: diagnose makes it on request (the file is not kept); `never`: private. */
  diagnose: "file" | "rendered" | "never";
  /** When it is written, in words. */
  when: string;
}

const GATEWAY_CREATE = "packages/controldir/src/jobfiles.ts";
const JEM = (m: string) => `apps/jem/src/${m}`;

export const CONTROL_FILES: { readonly [F in ControlFile]: ControlFileSpec } = {
  description: {
    writers: { [GATEWAY_CREATE]: ["create"] },
    mode: 0o600,
    readers: "diagnose",
    diagnose: "file",
    when: "at creation, as the client sent it; never changed",
  },
  spec: {
    writers: { [GATEWAY_CREATE]: ["create"] },
    mode: 0o600,
    readers: "JEM (every state handler), gateway (diagnose input/output)",
    diagnose: "never",
    when: "at creation: the normalized description as JSON; never changed",
  },
  acl: {
    writers: { [GATEWAY_CREATE]: ["create"] },
    mode: 0o600,
    readers: "diagnose",
    diagnose: "file",
    when: "at creation, when the description has one",
  },
  local: {
    writers: { [GATEWAY_CREATE]: ["create"], [JEM("files.ts")]: ["write"] },
    mode: 0o600,
    readers: "JEM (mapping, batch id), diagnose",
    diagnose: "file",
    when: "at creation; then the JEM rewrites keys (localid, mapping) by rename",
  },
  status: {
    writers: { [JEM("states/transition.ts")]: ["write"] },
    mode: 0o644,
    readers: "JEM (repair after a crash)",
    diagnose: "rendered",
    when: "at each state move (absent until the first); diagnose/status renders the record",
  },
  input_status: {
    writers: { "packages/controldir/src/inputstatus.ts": ["append"] },
    mode: 0o600,
    readers: "JEM (which inputs are present), diagnose",
    diagnose: "file",
    when: "append only, by both processes through inputstatus.ts: gateway on a completed upload, JEM on a download and on restart (-/ lines)",
  },
  errors: {
    writers: {
      [GATEWAY_CREATE]: ["create"],
      "packages/controldir/src/protocol.ts": ["remove"],
      [JEM("states/transition.ts")]: ["append"],
      [JEM("files.ts")]: ["append"],
    },
    mode: 0o600,
    readers: "diagnose, ceadm job log",
    diagnose: "file",
    when: "at creation when admitted at creation (its ACCEPTED -> PREPARING line; removed again before the commit if the owner is at its limit); then the JEM appends state changes, staging and submission messages",
  },
  failed: {
    writers: { [JEM("states/transition.ts")]: ["append"], [JEM("states/restart.ts")]: ["remove"] },
    mode: 0o600,
    readers: "diagnose",
    diagnose: "file",
    when: "appended on failure; removed on restart",
  },
  xml: {
    writers: {},
    mode: 0o600,
    readers: "diagnose",
    diagnose: "rendered",
    when: "never written: diagnose/xml renders the job's GLUE2 ComputingActivity from the record on request",
  },
  input: {
    writers: {},
    mode: 0o600,
    readers: "diagnose",
    diagnose: "rendered",
    when: "never written: diagnose/input renders it from spec (renderFileList)",
  },
  output: {
    writers: {},
    mode: 0o600,
    readers: "diagnose",
    diagnose: "rendered",
    when: "never written: diagnose/output renders it from spec (renderFileList)",
  },
  output_status: {
    writers: { [JEM("staging/worker.ts")]: ["append"] },
    mode: 0o600,
    readers: "diagnose",
    diagnose: "file",
    when: "appended for each upload done at FINISHING",
  },
  statistics: {
    writers: { [JEM("staging/worker.ts")]: ["append"] },
    mode: 0o600,
    readers: "diagnose",
    diagnose: "file",
    when: "appended for each transfer (input and output records)",
  },
  diag: {
    writers: { [JEM("priv/collect.ts")]: ["write"] },
    batchJob:
      "the job wrapper writes it at the job's end in its batch dir `<session>.lrms`; priv/collect.ts copies it here (no link followed, capped)",
    mode: 0o600,
    readers: "JEM (usage, exit code), diagnose",
    diagnose: "file",
    when: "at the batch job's end",
  },
  comment: {
    writers: { [JEM("priv/collect.ts")]: ["write"] },
    batchJob: "the job wrapper (as diag)",
    mode: 0o600,
    readers: "diagnose",
    diagnose: "file",
    when: "at the batch job's end",
  },
  grami: {
    writers: { [JEM("lrms/script-backend.ts")]: ["write"], [JEM("files.ts")]: ["write"] },
    mode: 0o600,
    readers: "JEM (a batch id left by an interrupted submission), the back end's stage 0",
    diagnose: "never",
    when: "by the batch back end at SUBMIT; the JEM drops the batch id from it on restart",
  },
  lrms_done: {
    writers: {
      [JEM("files.ts")]: ["create", "write", "remove"],
      [JEM("priv/collect.ts")]: ["write"],
    },
    batchJob: "the job wrapper writes it last at the job's end in its batch dir `<session>.lrms`; priv/collect.ts copies it here",
    mode: 0o600,
    readers: "JEM (the batch job is over, its exit code)",
    diagnose: "never",
    when: "at the batch job's end; by the poller when the batch system ended the job without one; by CANCELING when it gives up; removed on restart",
  },
  lrms_job: {
    writers: {},
    mode: 0o600,
    readers: "nobody",
    diagnose: "never",
    when: "reserved (an A-REX name); nothing writes it",
  },
  script: {
    writers: {},
    mode: 0o600,
    readers: "nobody",
    diagnose: "never",
    when: "reserved (an A-REX name); nothing writes it",
  },
  proxy: {
    writers: { [JEM("credentials.ts")]: ["remove"] },
    mode: 0o600,
    readers: "nobody",
    diagnose: "never",
    when: "no longer written: the batch job's proxy is in its batch dir `<session>.lrms` (credential-files.ts), rewritten on each renewal; one an older version left is removed when the batch job is over",
  },
};

/** The diagnose files made on request from the record or the stored description (no file is kept for them). */
export const RENDERED_ON_REQUEST: ReadonlySet<ControlFile> = new Set(
  (Object.keys(CONTROL_FILES) as ControlFile[]).filter((f) => CONTROL_FILES[f].diagnose === "rendered"),
);

/** The table as Markdown rows, for packages/controldir/README.md (writers.test.ts keeps the README equal to it). */
export function writerTableMarkdown(): string {
  const rows = (Object.keys(CONTROL_FILES) as ControlFile[]).map((f) => {
    const s = CONTROL_FILES[f];
    const who = Object.entries(s.writers).map(([m, kinds]) => `\`${m}\` (${kinds.join(", ")})`);
    if (s.batchJob) who.push(`batch job: ${s.batchJob}`);
    const mode = who.length ? `0${s.mode.toString(8)}` : "—";
    return `| \`${f}\` | ${who.length ? who.join("; ") : "nobody"} | ${mode} | ${s.readers} | ${s.diagnose} | ${s.when} |`;
  });
  return ["| file | written by (module: how) | mode | read by | diagnose | when |", "|---|---|---|---|---|---|", ...rows].join("\n");
}
