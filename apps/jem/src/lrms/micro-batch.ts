/** An item announced to a MicroBatcher before it is ready (see `expect`). */
export interface Expected {
  /** The item was added, or will not come: open batches stop waiting for it. Idempotent. */
  settle(): void;
}

/**
 * Coalesces concurrent per-item calls into one bulk call: items with the same key that arrive
 * within `windowMs` of the first (or until `max` are waiting) go to one `run`. Each caller gets
 * its own item's result, or its own error. Keys separate what must never share a call (the back
 * end runs a batch's script as one account).
 *
 * Callers that know an item is on its way (a job whose submission is still being prepared) say
 * so with `expect`: while announced items are outstanding, open batches wait for them (up to
 * `maxWaitMs` after their first item), and the moment the last one arrives they run. A burst
 * whose preparations end over a second (a loaded machine) so becomes a few bulk calls instead of
 * one call per straggler, and a lone job runs without waiting out the window.
 */
export class MicroBatcher<T, R> {
  private readonly open = new Map<
    string,
    { items: Array<{ item: T; resolve: (r: R) => void; reject: (e: unknown) => void }>; timer: NodeJS.Timeout }
  >();
  /** Announced items not yet added (nor given up). */
  private outstanding = 0;

  constructor(
    private readonly opts: {
      windowMs: number;
      /** The longest a batch waits for announced items (default: windowMs). */
      maxWaitMs?: number;
      max: number;
      /**
       * One result (or Error) per item, in order. A throw fails every item of the batch. `early`
       * answers item `i` before the run ends (its caller goes on; the final result is ignored).
       */
      run: (key: string, items: T[], early: (i: number, result: R) => void) => Promise<Array<R | Error>>;
    },
  ) {}

  /** Announces an item that will be added (or settled) later. */
  expect(): Expected {
    this.outstanding++;
    let open = true;
    return {
      settle: () => {
        if (!open) return;
        open = false;
        this.outstanding--;
        if (this.outstanding === 0) for (const key of [...this.open.keys()]) this.flush(key);
      },
    };
  }

  /** Adds `item`; `expected` (its announcement) is settled once the item is in its batch. */
  add(key: string, item: T, expected?: Expected): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      let batch = this.open.get(key);
      if (!batch) {
        const wait = this.outstanding > (expected ? 1 : 0) ? (this.opts.maxWaitMs ?? this.opts.windowMs) : this.opts.windowMs;
        batch = { items: [], timer: setTimeout(() => this.flush(key), wait) };
        this.open.set(key, batch);
      }
      batch.items.push({ item, resolve, reject });
      if (batch.items.length >= this.opts.max) this.flush(key);
      expected?.settle();
    });
  }

  private flush(key: string): void {
    const batch = this.open.get(key);
    if (!batch) return;
    this.open.delete(key);
    clearTimeout(batch.timer);
    const { items } = batch;
    this.opts
      .run(
        key,
        items.map((i) => i.item),
        (i, r) => items[i]?.resolve(r),
      )
      .then(
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
