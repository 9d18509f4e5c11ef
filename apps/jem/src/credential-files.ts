import { removePath, replaceFileIn, SessionFsError } from "@ce/sessionfs";
import { fileq } from "@ce/controldir";
import { SESSION_TOKEN_FILE, type JobCredential, type JobRecord, type RteCredential } from "@ce/store";
import { jobLog, type JemContext } from "./context.js";
import type { RunAsJob } from "./lrms/types.js";

/**
 * The credential files a running job reads, and the one writer of them (issue 34). Everything a
 * job holds of its delegation is written here, at SUBMIT and again whenever the client renews the
 * delegation while the job runs:
 *
 *   proxy         X.509: the batch dir's `proxy` (the wrapper's X509_USER_PROXY; ARC RTEs read it as
 *                 `<joboption_controldir>/job.<id>.proxy`, a link to it)
 *   user.proxy    X.509, when an RTE of the job needs a proxy: ENV/PROXY's copy in the session
 *   .bearer_token JWT, when an RTE of the job needs a token (ENV/TOKEN): in the session, named by
 *                 BEARER_TOKEN_FILE
 *
 * The session files are written by root through @ce/sessionfs (`replaceFileIn`: relative to the
 * session dir held open, O_EXCL|O_NOFOLLOW, a new file renamed over the old one), owned by the
 * job's account, mode 0600: the job never reads half a token, nothing the job planted is followed,
 * and no other account (the CE's included) can read them. Being in the session, they are where the
 * worker node reads the session. The token is never logged.
 *
 * Where the batch job's own proxy lives is `writeBatchProxy`'s business alone, so that moving it
 * (issue 35: the batch job's files into the session) changes this one function.
 */

/** The bearer token's file in the session (WLCG bearer-token discovery: BEARER_TOKEN_FILE). */
export const TOKEN_FILE = SESSION_TOKEN_FILE;
/** ENV/PROXY's copy of the proxy in the session (ARC's name). */
export const SESSION_PROXY_FILE = "user.proxy";

/** Session credential files a job keeps current: `token` (TOKEN_FILE), `proxy` (SESSION_PROXY_FILE). */
export type SessionCredFile = RteCredential;

/** The session credential files of a job whose RTEs need these credentials (record field `credFiles`). */
export function sessionCredFiles(needs: readonly RteCredential[]): SessionCredFile[] {
  return [...new Set(needs)].sort();
}

const filesOf = (job: Pick<JobRecord, "credFiles">): SessionCredFile[] =>
  (job.credFiles ?? "").split(",").filter((f): f is SessionCredFile => f === "token" || f === "proxy");

/** Owner of the session's credential files: the job's account (CE group, as the session dir); undefined with mapping off. */
function ownerOf(ctx: JemContext, runAs: RunAsJob | undefined): { uid: number; gid: number } | undefined {
  return runAs?.uid !== undefined && ctx.priv ? { uid: runAs.uid, gid: ctx.priv.ceGid } : undefined;
}

/**
 * The batch job's proxy file, replaced atomically, in the job's batch dir beside the session (the
 * control dir is not on the node): written as the account with mapping on, else by the CE into its
 * own batch dir (a fresh temporary name, then rename; no link followed). Its path is what the
 * wrapper exports as X509_USER_PROXY.
 */
async function writeBatchProxy(ctx: JemContext, job: JobRecord, runAs: RunAsJob | undefined, pem: string): Promise<string> {
  if (runAs) return runAs.writeFile("proxy", pem, 0o600);
  const path = `${ctx.control.batchDir(job.id)}/proxy`;
  await fileq.one(["write", path, pem, 0o600]);
  return path;
}

async function writeSession(ctx: JemContext, job: JobRecord, runAs: RunAsJob | undefined, name: string, content: string): Promise<string> {
  const session = ctx.control.sessionDir(job.id);
  await replaceFileIn(session, name, content, { mode: 0o600, owner: ownerOf(ctx, runAs) });
  return `${session}/${name}`;
}

export interface WrittenCredentials {
  /** The batch job's proxy (X.509 delegations). */
  proxyFile?: string;
  /** The token in the session (JWT delegation and an RTE that needs it). */
  tokenFile?: string;
  /** Record fields: what the files hold and which session files the JEM keeps current. */
  change: Pick<JobRecord, "credWritten" | "credFiles">;
}

/**
 * At SUBMIT, before RTE stage 0: the job's credential files for `cred` (the credential of its
 * main delegation, read fresh). `needs`: what the job's RTEs need (requested and site defaults).
 * `user.proxy` is left to ENV/PROXY's stage 0, which copies it; this module only replaces it later.
 */
export async function writeCredentialFiles(
  ctx: JemContext,
  job: JobRecord,
  cred: JobCredential | undefined,
  runAs: RunAsJob | undefined,
  needs: readonly RteCredential[],
): Promise<WrittenCredentials> {
  const change: WrittenCredentials["change"] = { credFiles: sessionCredFiles(needs).join(",") || undefined };
  if (!cred) return { change };
  change.credWritten = cred.storedAt;
  if (cred.type === "x509") return { proxyFile: await writeBatchProxy(ctx, job, runAs, cred.proxyPem), change };
  if (!needs.includes("token")) return { change };
  return { tokenFile: await writeSession(ctx, job, runAs, TOKEN_FILE, cred.token), change };
}

/**
 * A running job whose delegation was renewed (`credRenewed` later than `credWritten`): its files
 * get the new credential, each replaced atomically. Returns the record change to keep, or
 * undefined when there is nothing to do. A file that cannot be written is logged and the job goes
 * on: the next renewal tries again, and the old credential is still there.
 */
export function renewalPending(job: Pick<JobRecord, "credRenewed" | "credWritten">): boolean {
  return job.credRenewed !== undefined && job.credRenewed > (job.credWritten ?? 0);
}

/** `cred`: the job's credential as the store holds it now (credentials.ts `credentialFor`). */
export async function refreshCredentialFiles(
  ctx: JemContext,
  job: JobRecord,
  runAs: RunAsJob | undefined,
  cred: JobCredential | undefined,
): Promise<Pick<JobRecord, "credWritten"> | undefined> {
  if (!renewalPending(job)) return undefined;
  if (!cred) return { credWritten: job.credRenewed };
  const files = filesOf(job);
  const log = jobLog(ctx, job);
  const written: string[] = [];
  const attempt = async (what: string, write: () => Promise<unknown>) => {
    try {
      await write();
      written.push(what);
    } catch (e) {
      const reason = e instanceof SessionFsError ? e.reason : (e as Error).message;
      log.warn({ err: e, file: what, reason }, "renewed credential not written for the running job");
    }
  };
  if (cred.type === "x509") {
    await attempt("proxy", () => writeBatchProxy(ctx, job, runAs, cred.proxyPem));
    if (files.includes("proxy")) await attempt(SESSION_PROXY_FILE, () => writeSession(ctx, job, runAs, SESSION_PROXY_FILE, cred.proxyPem));
  } else if (files.includes("token")) {
    await attempt(TOKEN_FILE, () => writeSession(ctx, job, runAs, TOKEN_FILE, cred.token));
  }
  log.info({ delegationId: cred.delegationId, type: cred.type, files: written }, "renewed credential handed to the running job");
  return { credWritten: cred.storedAt ?? job.credRenewed };
}

/** Once the batch job is over the token leaves the session (before the stage-out could deliver it). */
export async function removeSessionToken(ctx: JemContext, job: JobRecord): Promise<void> {
  if (!filesOf(job).includes("token")) return;
  await removePath(ctx.control.sessionDir(job.id), [TOKEN_FILE]).catch((e: unknown) => {
    if (e instanceof SessionFsError && e.kind === "missing") return;
    jobLog(ctx, job).warn({ err: e }, "token file not removed from the session");
  });
}
