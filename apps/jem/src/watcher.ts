import { basename, dirname } from "node:path";
import { watch, type FSWatcher } from "chokidar";
import { enqueueAdvance, type JemContext } from "./context.js";
import { exists } from "./files.js";

/**
 * Completion detection for batch jobs: a chokidar watch on the control dir of every INLRMS /
 * CANCELING job (not the whole tree: finished jobs would cost watches for nothing), reacting to
 * `lrms_done`. File events are unreliable on shared file systems, so a periodic scan of the same
 * jobs (ids from Redis, one stat each) is the fallback and also keeps the watch set in sync.
 */
export function startWatcher(ctx: JemContext, opts: { useEvents: boolean }) {
  const watched = new Map<string, string>(); // job dir -> job id
  let fsw: FSWatcher | undefined;
  if (opts.useEvents) {
    // Initial events are wanted: a marker that appeared before the watch started must count.
    fsw = watch([], { ignoreInitial: false, depth: 0, persistent: true });
    const onFile = (path: string) => {
      if (basename(path) !== "lrms_done") return;
      const id = watched.get(dirname(path));
      if (id) void enqueueAdvance(ctx, id, "lrms-done-event").catch((e: unknown) => ctx.log.warn({ err: e }, "advance not queued"));
    };
    fsw.on("add", onFile).on("change", onFile).on("error", (e) => ctx.log.warn({ err: e }, "control dir watcher error"));
  }

  function watchJob(id: string, on: boolean): void {
    const dir = ctx.control.jobDir(id);
    if (on && !watched.has(dir)) {
      watched.set(dir, id);
      fsw?.add(dir);
    } else if (!on && watched.has(dir)) {
      watched.delete(dir);
      fsw?.unwatch(dir);
    }
  }

  let scanning = false;
  async function scan(): Promise<void> {
    if (scanning) return;
    scanning = true;
    try {
      const ids = new Set([...(await ctx.jobs.idsInState("INLRMS")), ...(await ctx.jobs.idsInState("CANCELING"))]);
      for (const id of [...watched.values()]) if (!ids.has(id)) watchJob(id, false);
      for (const id of ids) {
        watchJob(id, true);
        if (await exists(ctx.control.file(id, "lrms_done"))) await enqueueAdvance(ctx, id, "lrms-done-scan");
      }
    } finally {
      scanning = false;
    }
  }

  const timer = setInterval(() => void scan().catch((e: unknown) => ctx.log.warn({ err: e }, "control dir scan failed")), ctx.config.jem.scanIntervalMs);
  return {
    watchJob,
    scan,
    size: () => watched.size,
    async stop() {
      clearInterval(timer);
      await fsw?.close();
    },
  };
}
