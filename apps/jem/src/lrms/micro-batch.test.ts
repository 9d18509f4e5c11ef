import { afterEach, describe, expect, it, vi } from "vitest";
import { MicroBatcher } from "./micro-batch.js";

afterEach(() => {
  vi.useRealTimers();
});

describe("MicroBatcher", () => {
  it("coalesces per key within the window, flushes at max at once, answers each item", async () => {
    vi.useFakeTimers();
    const runs: Array<{ key: string; items: number[] }> = [];
    const b = new MicroBatcher<number, string>({
      windowMs: 5,
      max: 3,
      run: async (key, items) => {
        runs.push({ key, items });
        return items.map((i) => (i === 4 ? new Error("no four") : `${key}:${i}`));
      },
    });
    const a = [b.add("x", 1), b.add("y", 2), b.add("x", 3)];
    const full = Promise.allSettled([b.add("z", 4), b.add("z", 5), b.add("z", 6)]); // max reached: runs without waiting
    await Promise.resolve();
    expect(runs).toEqual([{ key: "z", items: [4, 5, 6] }]);
    await vi.advanceTimersByTimeAsync(5);
    expect(runs.slice(1)).toEqual([
      { key: "x", items: [1, 3] },
      { key: "y", items: [2] },
    ]);
    expect(await Promise.all(a)).toEqual(["x:1", "y:2", "x:3"]);
    expect(await full).toEqual([
      { status: "rejected", reason: new Error("no four") },
      { status: "fulfilled", value: "z:5" },
      { status: "fulfilled", value: "z:6" },
    ]);
  });

  it("a throwing run fails every item of its batch; a missing result fails that item", async () => {
    const boom = new MicroBatcher<number, number>({ windowMs: 1, max: 10, run: async () => Promise.reject(new Error("down")) });
    await expect(Promise.all([boom.add("k", 1), boom.add("k", 2)])).rejects.toThrow("down");
    const short = new MicroBatcher<number, number>({ windowMs: 1, max: 10, run: async (_k, items) => items.slice(1) });
    const r = await Promise.allSettled([short.add("k", 1), short.add("k", 2)]);
    expect(r[0]).toMatchObject({ status: "fulfilled", value: 2 });
    expect(r[1]).toMatchObject({ status: "rejected" });
  });

  it("waits for announced items (bounded by maxWaitMs) and runs once the last arrives; a lone announced item runs at once", async () => {
    vi.useFakeTimers();
    const runs: number[][] = [];
    const b = new MicroBatcher<number, number>({
      windowMs: 4,
      maxWaitMs: 200,
      max: 100,
      run: async (_k, items) => (runs.push(items), items),
    });
    const [e1, e2, e3] = [b.expect(), b.expect(), b.expect()];
    const p1 = b.add("k", 1, e1);
    await vi.advanceTimersByTimeAsync(50); // past the window: still waiting for the two announced
    expect(runs).toEqual([]);
    const p2 = b.add("k", 2, e2);
    e3.settle(); // gave up before adding: nothing left to wait for
    e3.settle(); // idempotent
    await Promise.resolve();
    expect(runs).toEqual([[1, 2]]);
    expect(await Promise.all([p1, p2])).toEqual([1, 2]);

    const [f1, f2] = [b.expect(), b.expect()];
    const q1 = b.add("k", 3, f1);
    await vi.advanceTimersByTimeAsync(199);
    expect(runs.length).toBe(1);
    await vi.advanceTimersByTimeAsync(1); // f2 never came: the bound
    expect(runs[1]).toEqual([3]);
    await q1;
    f2.settle();

    const lone = b.add("k", 4, b.expect());
    await Promise.resolve();
    expect(runs[2]).toEqual([4]);
    expect(await lone).toBe(4);
  });
});
