import { readdir } from "node:fs/promises";
import { basename } from "node:path";
import chokidar, { type FSWatcher } from "chokidar";
import { JOB_ID_RE } from "@ce/store";
import type { JemContext } from "./context.js";
import { exists } from "./files.js";
import { fsq } from "./fsq.js";
import { warnUnlessOutage } from "./outage.js";

/**
 * Completion detection for batch jobs. The job wrapper writes `<jobdir>/lrms_done` and then rings a
 * doorbell: an empty file `<control>/events/<jobId>`. chokidar watches that ONE flat directory, so
 * the cost does not grow with the number of active jobs. Its per-file bookkeeping is switched off
 * (every child is `ignored`; the watcher answers chokidar's `raw` events, which name the file).
 * chokidar still re-reads the directory on changes (at most about once a second): ~5% of the JEM's
 * CPU when 100 jobs end at once, the price of the project's one watcher library.
 * Doorbells arriving together are answered together: one ring (Redis call) for all, then each
 * removed; `lrms_done` stays the truth. File events are unreliable on shared file systems and
 * lost on an inotify overflow, so a periodic scan (doorbells left over, plus `lrms_done` of every
 * INLRMS / CANCELING job from Redis) is the fallback; the scan at boot answers doorbells rung while
 * no JEM ran.
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
  const answer = async (names: string[], why: string) => {
    const ids = names.filter((n) => JOB_ID_RE.test(n));
    if (ids.length > 0 && (await kick(ids, why))) {
      // On the file thread (fsq.ts), one message for the lot; a missing one is fine.
      await Promise.all(ids.map((id) => fsq.one(["unlink", `${dir}/${id}`])));
    }
  };

  let watcher: FSWatcher | undefined;
  if (opts.useEvents) {
    // Names seen in one turn of the event loop, answered together. Removing a doorbell is an event
    // too: only names that still exist are rung.
    let seen = new Set<string>();
    const flush = async () => {
      const names = [...seen];
      seen = new Set();
      const present = await Promise.all(names.map((n) => fsq.one(["lexists", `${dir}/${n}`])));
      await answer(names.filter((_, i) => present[i]), "lrms-done-event");
    };
    // ignoreInitial: doorbells rung while no JEM ran are answered by the scan at start.
    watcher = chokidar.watch(dir, { depth: 0, ignoreInitial: true, persistent: true, ignored: (p: string) => p !== dir });
    watcher.on("raw", (_event: string, name: string) => {
      const n = name ? basename(name) : "";
      if (!JOB_ID_RE.test(n)) return;
      if (seen.size === 0) setImmediate(() => void flush().catch((e: unknown) => warnUnlessOutage(ctx.outage, ctx.log, e, "doorbell not answered")));
      seen.add(n);
    });
    watcher.on("error", (err) => ctx.log.warn({ err }, "control dir watch failed; the periodic scan covers it"));
  }

  let scanning = false;
  async function scan(): Promise<void> {
    if (scanning || ctx.outage.down) return;
    scanning = true;
    try {
      await answer(await readdir(dir).catch(() => [] as string[]), "lrms-done-doorbell-scan");
      const ids = [...(await ctx.jobs.idsInState("INLRMS")), ...(await ctx.jobs.idsInState("CANCELING"))];
      const done: string[] = [];
      for (const id of ids) {
        if ((await exists(ctx.control.file(id, "lrms_done"))) || (ctx.priv !== undefined && (await exists(`${ctx.priv.batchDir(id)}/lrms_done`)))) done.push(id);
      }
      if (done.length > 0) await kick(done, "lrms-done-scan");
    } finally {
      scanning = false;
    }
  }

  const timer = setInterval(() => void scan().catch((e: unknown) => warnUnlessOutage(ctx.outage, ctx.log, e, "control dir scan failed")), ctx.config.jem.scanIntervalMs);
  return {
    scan,
    async stop() {
      clearInterval(timer);
      await watcher?.close();
    },
  };
}
