/**
 * The one way the stager starts a third-party transfer tool (xrdcp, xrdfs, and any protocol client
 * to come): as the job's mapped account, never as root.
 *
 * Such a tool talks to a server the user chose (a `root://` host, a replica the user's Rucio server
 * picked) and does what that server says: it follows redirects, opens local files for `file://`
 * answers, creates directories. Run as root, a hostile server could make it read any file into the
 * job's session or write one anywhere as root. Run as the job's account, it can do no more than
 * the job itself could. Its data goes only through the pipes the JEM holds (stdout into the entry
 * the JEM has open, stdin from the descriptor the JEM has open); its credential sits in a private
 * directory of the account (tools.ts privateDir), removed afterwards by descriptor.
 *
 * A JEM that does not run as root (developer mode, no mapping) runs tools as itself; a root JEM
 * refuses to start one for a job without a mapped account.
 */
import { Failure } from "@ce/model";
import { chmod, chown, mkdir, mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execa, type Options, type ResultPromise } from "execa";
import type { RunAsJob } from "../lrms/types.js";
import { removeTree } from "../priv/rootfs.js";

/** A tool the stager may not start (root without a mapped account, or the account refused); final. */
export class ToolRefused extends Failure<"ERR_STAGING_TOOL_REFUSED"> {
  constructor(message: string) {
    super("ERR_STAGING_TOOL_REFUSED", message);
  }
}

/** Who a tool runs as: the job's account (setpriv), or the JEM itself when it is not root. */
export interface ToolAccount {
  uid: number;
  gid: number;
  wrap(file: string, args: string[]): { file: string; args: string[] };
  env(extra: Record<string, string>): Record<string, string>;
}

/** A directory only the tool's account can enter; removed (no link followed) by `cleanup`. */
export interface PrivateDir {
  path: string;
  /** Writes `name` (0600, the account's) before the directory is handed over. */
  write(name: string, content: string): Promise<void>;
  /** Hands the directory to the account (0700); nothing is written into it by root after this. */
  seal(): Promise<void>;
  cleanup(): Promise<void>;
}

export interface ToolRunner {
  /**
   * Starts `file args` as the account with exactly `env` (plus the account's USER/LOGNAME/PATH).
   * The process comes wrapped: a bare execa process would be awaited to its end by the caller's `await`.
   */
  start(file: string, args: string[], env: Record<string, string>, o: Omit<Options, "env" | "extendEnv">): Promise<{ proc: ResultPromise }>;
  /** A fresh private directory for one run's credential and HOME. */
  privateDir(): Promise<PrivateDir>;
}

const isRoot = () => process.geteuid?.() === 0;

/**
 * A runner for one job. `account` is asked once, on the first tool start (http-only jobs never
 * need it): the job's mapped account from the privileged component, undefined with mapping off.
 */
export function toolRunner(account: () => Promise<ToolAccount | undefined>): ToolRunner {
  let who: Promise<ToolAccount | "self"> | undefined;
  const resolve = () =>
    (who ??= account().then(
      (a) => {
        if (a) return a;
        if (isRoot())
          throw new ToolRefused(
            "transfer tools never run as root, and this job has no mapped account (the JEM runs as root with mapping off)",
          );
        return "self" as const;
      },
      (e: unknown) => {
        throw new ToolRefused(`the job's account cannot run transfer tools: ${(e as Error).message}`);
      },
    ));
  return {
    async start(file, args, env, o) {
      const a = await resolve();
      if (a === "self") return { proc: execa(file, args, { ...o, env, extendEnv: false }) };
      if (a.uid === 0) throw new ToolRefused("transfer tools never run as root (uid 0)");
      const w = a.wrap(file, args);
      return { proc: execa(w.file, w.args, { ...o, env: a.env(env), extendEnv: false }) };
    },
    async privateDir() {
      const a = await resolve();
      // outer: root's, 0711 (the account passes through, cannot rename what is inside);
      // inner: written while root's, then handed to the account.
      const outer = await mkdtemp(join(tmpdir(), "ce-tool-"));
      const inner = join(outer, "c");
      try {
        await chmod(outer, 0o711);
        await mkdir(inner, { mode: 0o700 });
      } catch (e) {
        await removeTree(outer).catch(() => undefined);
        throw e;
      }
      const names: string[] = [];
      let sealed = false;
      return {
        path: inner,
        async write(name, content) {
          if (sealed) throw new Error("private tool directory already handed over");
          await writeFile(join(inner, name), content, { mode: 0o600, flag: "wx" });
          names.push(name);
        },
        async seal() {
          sealed = true;
          if (a === "self") return;
          // Still root's and 0700: nothing the account could have swapped in yet.
          for (const n of names) await chown(join(inner, n), a.uid, a.gid);
          await chown(inner, a.uid, a.gid);
        },
        cleanup: () => removeTree(outer),
      };
    },
  };
}

/** The job's account as a tool account, from the privileged component's RunAsJob. */
export function toolAccountOf(as: RunAsJob | undefined): ToolAccount | undefined {
  if (!as) return undefined;
  if (as.uid === undefined || as.gid === undefined) throw new ToolRefused(`account ${as.account} has no known uid/gid`);
  return { uid: as.uid, gid: as.gid, wrap: (f, a) => as.wrap(f, a), env: (x) => as.env(x) };
}
