/**
 * Coalesces concurrent per-item calls into one bulk call: items with the same key that arrive
 * within `windowMs` of the first (or until `max` are waiting) go to one `run`. Each caller gets
 * its own item's result, or its own error. Keys separate what must never share a call (the back
 * end runs a batch's script as one account).
 */
export class MicroBatcher<T, R> {
  private readonly open = new Map<string, { items: Array<{ item: T; resolve: (r: R) => void; reject: (e: unknown) => void }>; timer: NodeJS.Timeout }>();

  constructor(
    private readonly opts: {
      windowMs: number;
      max: number;
      /** One result (or Error) per item, in order. A throw fails every item of the batch. */
      run: (key: string, items: T[]) => Promise<Array<R | Error>>;
    },
  ) {}

  add(key: string, item: T): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      let batch = this.open.get(key);
      if (!batch) {
        batch = { items: [], timer: setTimeout(() => this.flush(key), this.opts.windowMs) };
        this.open.set(key, batch);
      }
      batch.items.push({ item, resolve, reject });
      if (batch.items.length >= this.opts.max) this.flush(key);
    });
  }

  private flush(key: string): void {
    const batch = this.open.get(key);
    if (!batch) return;
    this.open.delete(key);
    clearTimeout(batch.timer);
    const { items } = batch;
    this.opts.run(key, items.map((i) => i.item)).then(
      (results) =>
        items.forEach((it, n) => {
          const r = results[n];
          if (r instanceof Error) it.reject(r);
          else if (r === undefined) it.reject(new Error("bulk call returned no result for this item"));
          else it.resolve(r);
        }),
      (e: unknown) => items.forEach((it) => it.reject(e)),
    );
  }
}
