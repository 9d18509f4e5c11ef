// Why `events/` is watched with `fs.watch` and not chokidar. chokidar 4 consults `ignored` before
// any stat only for the paths given to `add()` (`NodeFsHandler._addToNodeFs`). The entries of a
// watched directory are judged later: the directory's watch listener (`NodeFsHandler._handleDir`)
// re-reads the whole directory on each event (`_handleRead`, throttled to one read a second plus a
// trailing one) through `FSWatcher._readdirp`, which forces readdirp's `alwaysStat` and `lstat`; so
// readdirp 4 lists every name at once (`ReaddirpStream._exploreDir`, no cap), lstats each one
// (`_formatEntry`) and resolves each symlink's target (`_getEntryType`: realpath + lstat) before
// `fileFilter`/`directoryFilter` hand it to `ignored` (`WatchHelper.filterPath`/`filterDir`). An
// ignored name thus costs an lstat on every event in the directory, and a job that fills the
// directory makes every doorbell cost as much as the whole directory. No option avoids it:
// `depth: 0` still reads the directory itself, `ignoreInitial` only silences the first read's
// events, a negative depth leaves the directory unwatched, `usePolling` re-reads the same way, and
// watching a missing child (chokidar's `target`) still re-reads every entry. `fs.watch` names the
// entry in the event itself: a name that is not a job id costs one regex test and nothing is kept.
import { watch, type FSWatcher } from "node:fs";
import { opendir } from "node:fs/promises";
import { Dir, removeEntry, SessionFsError } from "@ce/sessionfs";
import { JOB_ID_RE, fileq } from "@ce/controldir";
import type { JemContext } from "./context.js";
import { exists } from "./files.js";
import { batchEnded } from "./priv/collect.js";
import { warnUnlessOutage } from "./outage.js";

/**
 * Entries of `events/` looked at per sweep. The directory is writable by every account (1733), so
 * its size is the jobs' choice: a sweep reads it as a stream and stops here, whatever is behind.
 */
export const SWEEP_CAP = 10_000;
/** A sweep that stopped at the cap is followed by the next one this soon (junk drains at a bounded rate). */
const SWEEP_AGAIN_MS = 500;
/** Junk entries unlinked per file-thread turn. */
const REMOVE_CHUNK = 500;
/** Doorbell names from file events waiting for one answer; more than this are left to a sweep. */
const PENDING_CAP = 1_000;

/** unlink(2) of a directory: EISDIR on Linux, EPERM by POSIX. */
function isDirError(r: PromiseSettledResult<unknown>): boolean {
  const code = r.status === "rejected" ? (r.reason as { code?: unknown }).code : undefined;
  return code === "EISDIR" || code === "EPERM";
}

/**
 * Completion detection for batch jobs. The job wrapper writes `lrms_done` in its batch dir and then
 * rings a doorbell: an empty file `<sessionRoot>/.events/<jobId>` (the control dir is not the job's). One inotify watch on that flat directory
 * (`fs.watch`) names each new entry, so the cost does not grow with the number of active jobs, and
 * the watch keeps no state per entry: a name that is not a job id costs one regex test and is
 * forgotten. Doorbells arriving together are answered together: one ring (Redis call) for all,
 * then each removed; `lrms_done` stays the truth.
 *
 * Every account can create entries of any type and any name in `events/`, so a sweep reads at
 * most SWEEP_CAP of them (a streamed `opendir`), rings the job ids among them and removes the
 * rest; removal is relative to the held directory, and a directory entry is removed by
 * `@ce/sessionfs` without following a link. File events are unreliable on shared file systems and
 * lost on an inotify overflow, so a periodic scan (a sweep, plus `lrms_done` of every INLRMS /
 * CANCELING job from Redis) is the fallback; the scan at boot answers doorbells rung while no JEM
 * ran. A doorbell behind a capped sweep's horizon is found by that `lrms_done` check.
 */
export function startWatcher(ctx: JemContext, opts: { useEvents: boolean }) {
  const dir = ctx.control.eventsDir();
  // Urgent rings (completions overtake a burst of new submissions), as enqueueAdvance's.
  const kick = async (ids: string[], why: string): Promise<boolean> => {
    try {
      await ctx.advance.ring(ids, 1);
      return true;
    } catch (e) {
      warnUnlessOutage(ctx.outage, ctx.log, e, "advance not queued", { jobIds: ids.slice(0, 10), count: ids.length, why });
      return false;
    }
  };
  // Doorbells stay until their jobs are rung: the scan after a Redis outage rings them again.
  const answer = async (events: Dir, ids: string[], why: string) => {
    if (ids.length > 0 && (await kick(ids, why)))
      await removeAll(
        events,
        ids.map((name) => ({ name, isDir: undefined })),
      );
  };
  const removeAll = async (events: Dir, entries: Array<{ name: string; isDir: boolean | undefined }>) => {
    // Files on the file thread (@ce/controldir files.ts), one message for the lot. The file thread opens `events/`
    // itself (O_DIRECTORY|O_NOFOLLOW, its parents are the CE's) and unlinks each name relative to
    // that descriptor (@ce/controldir ops.ts): unlink never follows the final link, and a missing entry
    // is fine. Not `events.at(name)`: that is a /proc/self/fd magic link, which O_NOFOLLOW refuses.
    // In chunks: a sweep's thousands of names in flight at once would only raise the memory high-water mark.
    const files = entries.filter((e) => e.isDir !== true);
    const unlinked: PromiseSettledResult<boolean>[] = [];
    for (let i = 0; i < files.length; i += REMOVE_CHUNK)
      unlinked.push(...(await Promise.allSettled(files.slice(i, i + REMOVE_CHUNK).map((e) => fileq.one(["unlink", `${dir}/${e.name}`])))));
    // Directories (and entries swapped for one since they were listed) go through @ce/sessionfs,
    // one at a time: a tree is walked from the held descriptor, no link followed.
    const dirs = [...entries.filter((e) => e.isDir === true), ...files.filter((_, i) => isDirError(unlinked[i]!))];
    const errors = unlinked.flatMap((r) => (r.status === "rejected" && !isDirError(r) ? [r.reason as unknown] : []));
    for (const e of dirs) {
      await removeEntry(events, e.name, `events/${e.name}`).catch((err: unknown) => {
        if (!(err instanceof SessionFsError && err.kind === "missing")) errors.push(err);
      });
    }
    if (errors.length > 0) ctx.log.warn({ err: errors[0], failed: errors.length }, "events: entries not removed");
  };

  let sweepTimer: NodeJS.Timeout | undefined;
  let stopped = false;
  /** Reads at most SWEEP_CAP entries; true when it stopped at the cap (more may be behind). */
  const sweep = async (why: string): Promise<boolean> => {
    const events = await Dir.open(dir).catch(() => undefined);
    if (!events) return false;
    try {
      const ids: string[] = [];
      const junk: Array<{ name: string; isDir: boolean }> = [];
      let seen = 0;
      let capped = false;
      for await (const e of await opendir(events.self, { bufferSize: 1024 })) {
        if (++seen > SWEEP_CAP) {
          capped = true;
          break;
        }
        if (JOB_ID_RE.test(e.name) && !e.isDirectory()) ids.push(e.name);
        else junk.push({ name: e.name, isDir: e.isDirectory() });
      }
      if (junk.length > 0) {
        ctx.log.info({ count: junk.length, capped }, "events: removing entries that are not doorbells");
        await removeAll(events, junk);
      }
      await answer(events, ids, why);
      return capped;
    } finally {
      await events.close();
    }
  };
  const sweepAgain = (capped: boolean) => {
    if (!capped || stopped || sweepTimer) return;
    sweepTimer = setTimeout(() => {
      sweepTimer = undefined;
      if (scanning || ctx.outage.down) return sweepAgain(true);
      scanning = true;
      void sweep("lrms-done-doorbell-scan")
        .then(sweepAgain)
        .catch((e: unknown) => warnUnlessOutage(ctx.outage, ctx.log, e, "events sweep failed"))
        .finally(() => (scanning = false));
    }, SWEEP_AGAIN_MS);
    sweepTimer.unref();
  };

  let watcher: FSWatcher | undefined;
  if (opts.useEvents) {
    // Names seen while the previous answer ran, answered together. Removing a doorbell is an event
    // too: only names that still exist are rung.
    let pending = new Set<string>();
    let flushing = false;
    const flush = async () => {
      flushing = true;
      try {
        while (pending.size > 0) {
          const names = [...pending];
          pending = new Set();
          const present = await Promise.all(names.map((n) => fileq.one(["lexists", `${dir}/${n}`])));
          const ids = names.filter((_, i) => present[i]);
          if (ids.length === 0) continue;
          const events = await Dir.open(dir);
          try {
            await answer(events, ids, "lrms-done-event");
          } finally {
            await events.close();
          }
        }
      } finally {
        flushing = false;
      }
    };
    const onName = (_event: string, name: string | null) => {
      if (typeof name !== "string" || !JOB_ID_RE.test(name)) return;
      if (pending.size >= PENDING_CAP) {
        // A flood of id-shaped names: the rest wait for a sweep, which is bounded.
        sweepAgain(true);
        return;
      }
      pending.add(name);
      if (!flushing && pending.size === 1)
        setImmediate(() => void flush().catch((e: unknown) => warnUnlessOutage(ctx.outage, ctx.log, e, "doorbell not answered")));
    };
    try {
      watcher = watch(dir, { persistent: true }, onName);
      watcher.on("error", (err) => ctx.log.warn({ err }, "control dir watch failed; the periodic scan covers it"));
    } catch (err) {
      ctx.log.warn({ err, dir }, "control dir not watched; the periodic scan covers it");
    }
  }

  let scanning = false;
  async function scan(): Promise<void> {
    if (scanning || ctx.outage.down) return;
    scanning = true;
    try {
      sweepAgain(await sweep("lrms-done-doorbell-scan"));
      const ids = [...(await ctx.jobs.idsInState("INLRMS")), ...(await ctx.jobs.idsInState("CANCELING"))];
      const done: string[] = [];
      for (const id of ids) {
        if ((await exists(ctx.control.file(id, "lrms_done"))) || (await batchEnded(ctx.control, id))) done.push(id);
      }
      if (done.length > 0) await kick(done, "lrms-done-scan");
    } finally {
      scanning = false;
    }
  }

  const timer = setInterval(
    () => void scan().catch((e: unknown) => warnUnlessOutage(ctx.outage, ctx.log, e, "control dir scan failed")),
    ctx.config.jem.scanIntervalMs,
  );
  return {
    scan,
    async stop() {
      stopped = true;
      clearInterval(timer);
      clearTimeout(sweepTimer);
      watcher?.close();
    },
  };
}
