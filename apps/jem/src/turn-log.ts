import type { Logger } from "pino";

/**
 * Log lines of one event-loop turn, grouped: a bulk step (100 jobs moved, or submitted, in one
 * turn) is one info line instead of one per job, because a pino line (redaction, synchronous
 * write) cost ~10% of the JEM's CPU in such bursts. A lone item keeps its own line (`msg`, the
 * item as fields); several give one `summary(items)` line (`summaryMsg`), each item's own line then
 * at debug. One grouping per logger.
 */
export function turnLog<T extends object>(
  msg: string,
  summaryMsg: string,
  summary: (items: T[]) => Record<string, unknown>,
): (ctx: { log: Logger }, item: T) => void {
  const turns = new WeakMap<object, T[]>();
  return (ctx, item) => {
    let items = turns.get(ctx);
    if (!items) {
      turns.set(ctx, (items = []));
      setImmediate(() => {
        const all = turns.get(ctx) ?? [];
        turns.delete(ctx);
        if (all.length === 1) {
          ctx.log.info(all[0] as Record<string, unknown>, msg);
          return;
        }
        ctx.log.info(summary(all), summaryMsg);
        if (ctx.log.isLevelEnabled("debug")) for (const x of all) ctx.log.debug(x as Record<string, unknown>, msg);
      });
    }
    items.push(item);
  };
}
