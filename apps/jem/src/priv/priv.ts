import { Failure } from "@ce/model";
import { lstat, readFile, stat } from "node:fs/promises";
import { dirname, join } from "node:path";
import type { Logger } from "pino";
import type { CompiledConfig } from "@ce/config";
import { ACCOUNT_NAME } from "@ce/config";
import { accountProblem, lookupAccounts, ownUids, parseGridMap, poolAccounts, type Account } from "@ce/mapping";
import type { LocalUser } from "@ce/model";
import { type ControlDir, JOB_ID_RE, parseKeyValues, fileq, type FsOp } from "@ce/controldir";
import type { RunAsJob } from "../lrms/types.js";
import { collectBatchFiles } from "./collect.js";
import { removeTree } from "./rootfs.js";
import { handOverTree, SessionFsError, type HandOverReport } from "@ce/sessionfs";

/**
 * The JEM's privileged component (docs/security.md "Privilege separation"). Everything the CE does as root
 * for a job is here, behind `<operation>(jobId)`: the account always comes from the job's `local`
 * control file (written by the gateway, not writable by jobs), re-checked against the current
 * mapping configuration and the name service on every call; whatever touches the job's own files
 * or starts its processes runs under `setpriv` as that account with its groups.
 */

/** The mapped account a privileged operation acts as, checked. */
export interface RunAs {
  account: string;
  uid: number;
  gid: number;
}

export class PrivRefused extends Failure<"PRIV_REFUSED"> {
  constructor(message: string) {
    super("PRIV_REFUSED", message);
  }
}

const SMALL = 64 * 1024;
/**
 * An account lookup (two `getent` runs: ~10 ms of process start-up each in a JEM of this size) is
 * shared by the jobs that need it within this time: a burst of 100 jobs of one account costs one.
 */
const LOOKUP_SHARE_MS = 5_000;
/**
 * Entries of a session the hand-over walks before it refuses (the job fails with the reason):
 * ~2.4 s of CPU per 100,000 on a local disk (measured on a 2-core VM; `chown -R` + `chmod -R` took ~1 s),
 * with a progress line every 50,000.
 */
const HAND_OVER_MAX = 1_000_000;
/** Grid Engine client settings a mapped account's qsub/qstat/qdel need (which cell, its ports). */
const SGE_ENV = new Set(["SGE_ROOT", "SGE_CELL", "SGE_QMASTER_PORT", "SGE_EXECD_PORT", "SGE_CLUSTER_NAME"]);

export class Privileged {
  private gridmaps = new Map<string, { key: string; accounts: Set<string> }>();
  /** Lookups by account name (bounded by the mapping targets: only those are looked up). */
  private lookups = new Map<string, { at: number; result: Promise<Account | undefined> }>();

  private constructor(
    private readonly config: CompiledConfig,
    private readonly control: ControlDir,
    /** Group of the CE (gateway, JEM): shares the session and batch dirs with the account. */
    readonly ceGid: number,
    private readonly ceUids: number[],
  ) {}

  /** Undefined when mapping is off (jobs run as the CE). Throws when mapping is on but the JEM cannot switch users. */
  static async create(config: CompiledConfig, control: ControlDir): Promise<Privileged | undefined> {
    if (!config.mapping) return undefined;
    if (process.geteuid?.() !== 0) {
      throw new Error(
        'mapping is configured but the JEM does not run as root: it cannot run jobs as mapped accounts (run the JEM as root, see docs/security.md "Privilege separation")',
      );
    }
    // Jobs reach their batch dirs (and, with a shared session, their session dirs) by path:
    // every ancestor must be traversable. The control dir is the CE's alone: no job needs it.
    const roots = config.lrms?.sharedSession === false ? [control.batchRoot] : [control.sessionRoot, control.batchRoot];
    for (const root of new Set(roots)) {
      for (let d = dirname(root); ; d = dirname(d)) {
        if (((await stat(d)).mode & 0o001) === 0)
          throw new Error(
            `mapping is on but ${d} is not traversable by other users (o+x), so mapped accounts cannot reach ${root}: chmod o+x ${d}`,
          );
        if (d === dirname(d)) break;
      }
    }
    // The CE's own account is whoever owns the control dir (the gateway's account in compose).
    const owner = await stat(control.root);
    const ceGid = Number(process.env.CE_GID ?? owner.gid);
    return new Privileged(config, control, ceGid, [...new Set([...ownUids(), owner.uid])]);
  }

  /** Accounts the current configuration may map to (fixed, pools, default, grid-mapfiles). */
  private async targets(): Promise<Set<string>> {
    const m = this.config.mapping!;
    const out = new Set<string>();
    if (typeof m.onNoMatch === "object") out.add(m.onNoMatch.user);
    for (const r of m.rules) {
      if (r.user) out.add(r.user);
      else if (r.pool) for (const a of poolAccounts(r.pool)) out.add(a);
      else if (r.gridmap) for (const a of await this.gridmapAccounts(r.gridmap)) out.add(a);
    }
    return out;
  }

  private async gridmapAccounts(path: string): Promise<Set<string>> {
    const st = await stat(path).catch(() => undefined);
    const key = st ? `${st.ino}:${st.size}:${st.mtimeMs}` : "missing";
    const hit = this.gridmaps.get(path);
    if (hit?.key === key) return hit.accounts;
    const text = st ? await readFile(path, "utf8").catch(() => "") : "";
    const accounts = new Set([...parseGridMap(text).entries.values()].map((e) => e.accounts[0]!));
    this.gridmaps.set(path, { key, accounts });
    return accounts;
  }

  /**
   * The account of a job, from its `local` control file, refused unless it is a mapping target of
   * the current configuration that exists with the uid/gid recorded at submission and may run jobs
   * (never root, the CE's own account, a uid below mapping.minUid or the root group).
   */
  async accountFor(jobId: string, record?: LocalUser): Promise<RunAs> {
    if (!JOB_ID_RE.test(jobId)) throw new PrivRefused(`not a job id: ${JSON.stringify(jobId.slice(0, 80))}`);
    const text = await readSmall(this.control.file(jobId, "local"), SMALL);
    const kv = parseKeyValues(text ?? "");
    const name = kv.localuser;
    const uid = Number(kv.localuid);
    const gid = Number(kv.localgid);
    if (!name || !Number.isInteger(uid) || !Number.isInteger(gid))
      throw new PrivRefused(`job ${jobId} has no mapped account in its local file`);
    if (!ACCOUNT_NAME.test(name)) throw new PrivRefused(`job ${jobId}: ${JSON.stringify(name)} is not an account name`);
    if (record && (record.account !== name || record.uid !== uid))
      throw new PrivRefused(`job ${jobId}: the local file and the job record name different accounts`);
    if (!(await this.targets()).has(name))
      throw new PrivRefused(`job ${jobId}: account ${name} is not a mapping target of the current configuration`);
    const a = await this.lookup(name);
    if (!a) throw new PrivRefused(`job ${jobId}: account ${name} does not exist`);
    if (a.uid !== uid || a.gid !== gid)
      throw new PrivRefused(`job ${jobId}: account ${name} is uid ${a.uid}/gid ${a.gid} now, ${uid}/${gid} at submission`);
    const why = accountProblem(a, { minUid: this.config.mapping!.minUid, ceUids: this.ceUids, ceGids: [this.ceGid] });
    if (why) throw new PrivRefused(`job ${jobId}: ${why}`);
    return { account: name, uid, gid };
  }

  /** The name service's entry of `name`, shared for LOOKUP_SHARE_MS; a failed lookup is not kept. */
  private lookup(name: string): Promise<Account | undefined> {
    const now = Date.now();
    const hit = this.lookups.get(name);
    if (hit && now - hit.at < LOOKUP_SHARE_MS) return hit.result;
    const result = lookupAccounts([name]).then((m) => m.get(name));
    this.lookups.set(name, { at: now, result });
    result.catch(() => {
      if (this.lookups.get(name)?.result === result) this.lookups.delete(name);
    });
    return result;
  }

  /** `setpriv` argv running `file args` as the account with its supplementary groups (initgroups). */
  wrap(as: RunAs, file: string, args: string[]): { file: string; args: string[] } {
    return { file: "setpriv", args: [`--reuid=${as.uid}`, `--regid=${as.gid}`, "--init-groups", "--", file, ...args] };
  }

  /** The environment a process of the account gets: nothing of the JEM's (secrets may be there). */
  envFor(as: RunAs, extra: Record<string, string>): Record<string, string> {
    // The batch system's own client settings: Slurm's configuration file, the Grid Engine cell.
    const keep = Object.entries(process.env).filter(
      ([k]) => k === "SLURM_CONF" || k.startsWith("JEM_SLURM_") || SGE_ENV.has(k) || k.startsWith("JEM_SGE_"),
    );
    return {
      PATH: "/usr/local/bin:/usr/bin:/bin",
      LANG: "C.UTF-8",
      USER: as.account,
      LOGNAME: as.account,
      HOME: "/",
      ...(Object.fromEntries(keep) as Record<string, string>),
      ...extra,
    };
  }

  /** What a back end needs to run one job's scripts as its account. */
  forJob(jobId: string, as: RunAs): RunAsJob {
    return {
      account: as.account,
      uid: as.uid,
      gid: as.gid,
      wrap: (file, args) => this.wrap(as, file, args),
      env: (extra) => this.envFor(as, extra),
      writeFile: (name, content, mode) => this.writeFile(jobId, as, name, content, mode),
    };
  }

  batchDir(jobId: string): string {
    return this.control.batchDir(jobId);
  }

  /**
   * prepare-session: the session dir becomes the account's (group: the CE's, setgid, 2770; files
   * ug+rw, nothing for others). By the descriptor walk of @ce/sessionfs `handOverTree`, never a
   * `chown -R` by path: on a rerun the tree is the job's, and a name in it may lead to a file that
   * is not (a hard link of a cached input): only the account's and the CE's own entries change,
   * no link is followed, a hard link of another's file is left alone.
   */
  async prepareSession(jobId: string, as: RunAs, log?: Logger): Promise<void> {
    const dir = this.control.sessionDir(jobId);
    // The common case, a fresh empty session dir (nothing to stage in), in one file-thread call.
    if ((await fileq.one(["ownEmptyDir", dir, this.ceUids, as.uid, this.ceGid, 0o2770])) === true) return;
    const started = Date.now();
    let report: HandOverReport;
    try {
      report = await handOverTree(dir, {
        uid: as.uid,
        gid: this.ceGid,
        from: [0, ...this.ceUids],
        maxEntries: HAND_OVER_MAX,
        onProgress: (walked) => log?.info({ walked, ms: Date.now() - started }, "session hand-over in progress"),
      });
    } catch (e) {
      if (!(e instanceof SessionFsError)) throw e;
      const why = e.kind === "too-large" ? `it holds more than ${HAND_OVER_MAX} entries` : e.reason;
      throw new PrivRefused(`session directory of job ${jobId} not handed to ${as.account}: ${why}`);
    }
    const ms = Date.now() - started;
    if (report.skipped > 0) log?.warn({ ...report, ms }, "session hand-over left entries that are not the account's or the CE's alone");
    else if (report.walked >= 10_000 || ms >= 1_000) log?.info({ ...report, ms }, "session handed over");
  }

  /**
   * prepare-batch: a fresh `<session>.lrms` owned by the account (2770, CE group), beside the
   * session dir under the traverse-only session root: the job reaches it by name, the control dir
   * not at all.
   */
  async prepareBatchDir(jobId: string, as: RunAs): Promise<string> {
    const dir = this.batchDir(jobId);
    const make: FsOp = ["mkdirOwned", dir, as.uid, this.ceGid, 0o2770];
    try {
      // One file-thread call when there is no batch dir yet (the usual case).
      await fileq.one(make);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
      // A fresh one: an earlier attempt's is removed without following any link in it.
      await removeTree(dir);
      await fileq.one(make);
    }
    return dir;
  }

  /**
   * Whether an earlier attempt's batch dir is complete: a directory (not a link) that prepareBatchDir
   * finished handing to the account (owner, CE group, 2770). A JEM killed inside it leaves the dir
   * the CE's with 0700 (made, not handed over): the account's scripts cannot enter it, and no script
   * ran as the account there yet, so the next attempt prepares it afresh instead of reusing it.
   */
  async batchDirReady(jobId: string, as: RunAs): Promise<boolean> {
    const st = await lstat(this.batchDir(jobId)).catch(() => undefined);
    return st !== undefined && st.isDirectory() && st.uid === as.uid && st.gid === this.ceGid && (st.mode & 0o7777) === 0o2770;
  }

  /** Writes a file of the batch dir (job.sh, batch.env, proxy) owned by the account; never follows a planted link. */
  async writeFile(jobId: string, as: RunAs, name: string, content: string, mode: number): Promise<string> {
    if (!/^[A-Za-z0-9._-]+$/.test(name)) throw new PrivRefused(`bad batch file name ${name}`);
    const path = join(this.batchDir(jobId), name);
    // On the file thread (@ce/controldir files.ts): a fresh temporary name (O_EXCL|O_NOFOLLOW), chown, chmod, rename.
    await fileq.one(["writeOwned", path, content, as.uid, as.gid, mode]);
    return path;
  }

  /**
   * Copies what the batch job wrote (lrms_done, diag, comment) from the account's batch dir into
   * the CE's job dir (collect.ts: by descriptor, no link followed, capped). True when the batch
   * job has finished (lrms_done present).
   */
  async collect(jobId: string): Promise<boolean> {
    return (await collectBatchFiles(this.control, jobId)).ended;
  }
}

/** A regular file's first `max` bytes (or last, `tail`), undefined when absent, a link, or not a regular file (on the file thread). */
export async function readSmall(path: string, max: number, tail = false): Promise<string | undefined> {
  return ((await fileq.one(["readSmall", path, max, tail])) as string | null) ?? undefined;
}
