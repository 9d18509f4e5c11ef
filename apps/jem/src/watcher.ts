import { readdir, rm } from "node:fs/promises";
import { basename } from "node:path";
import chokidar, { type FSWatcher } from "chokidar";
import { JOB_ID_RE } from "@ce/store";
import { enqueueAdvance, type JemContext } from "./context.js";
import { exists } from "./files.js";
import { warnUnlessOutage } from "./outage.js";

/**
 * Completion detection for batch jobs. The job wrapper writes `<jobdir>/lrms_done` and then rings a
 * doorbell: an empty file `<control>/events/<jobId>`. chokidar watches that ONE flat directory
 * (depth 0), so the cost does not grow with the number of active jobs (watching every job's own
 * directory measured ~83 KB each with chokidar). A doorbell is removed once the job is queued for
 * attention; `lrms_done` stays the truth. File events are unreliable on shared file systems, so a
 * periodic scan (doorbells left over, plus `lrms_done` of every INLRMS / CANCELING job from Redis)
 * is the fallback.
 */
export function startWatcher(ctx: JemContext, opts: { useEvents: boolean }) {
  const dir = ctx.control.eventsDir();
  const kick = async (id: string, why: string): Promise<boolean> => {
    try {
      await enqueueAdvance(ctx, id, why, 0, undefined, { urgent: true });
      return true;
    } catch (e) {
      warnUnlessOutage(ctx.outage, ctx.log, e, "advance not queued", { jobId: id });
      return false;
    }
  };
  // The doorbell stays until the advance is queued: the scan after a Redis outage rings it again.
  const ring = async (path: string, why: string) => {
    const id = basename(path);
    if (!JOB_ID_RE.test(id)) return;
    if (await kick(id, why)) await rm(path, { force: true });
  };

  let watcher: FSWatcher | undefined;
  if (opts.useEvents) {
    // ignoreInitial false: doorbells rung while no JEM was running are answered at start.
    watcher = chokidar.watch(dir, { depth: 0, ignoreInitial: false, persistent: true });
    watcher.on("add", (path) => void ring(path, "lrms-done-event").catch((e: unknown) => warnUnlessOutage(ctx.outage, ctx.log, e, "doorbell not answered")));
    watcher.on("error", (err) => ctx.log.warn({ err }, "control dir watch failed; the periodic scan covers it"));
  }

  let scanning = false;
  async function scan(): Promise<void> {
    if (scanning || ctx.outage.down) return;
    scanning = true;
    try {
      for (const name of await readdir(dir).catch(() => [] as string[])) await ring(`${dir}/${name}`, "lrms-done-doorbell-scan");
      const ids = [...(await ctx.jobs.idsInState("INLRMS")), ...(await ctx.jobs.idsInState("CANCELING"))];
      for (const id of ids) {
        const done = (await exists(ctx.control.file(id, "lrms_done"))) || (ctx.priv !== undefined && (await exists(`${ctx.priv.batchDir(id)}/lrms_done`)));
        if (done) await kick(id, "lrms-done-scan");
      }
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
