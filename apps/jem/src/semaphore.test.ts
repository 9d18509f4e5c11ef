import { describe, expect, it } from "vitest";
import { FairSlots } from "./semaphore.js";

const tick = () => new Promise((r) => setImmediate(r));

describe("FairSlots", () => {
  it("caps each owner, and serves waiting owners in turn", async () => {
    const slots = new FairSlots(2, 2);
    const order: string[] = [];
    const gates: Array<() => void> = [];
    const job = (owner: string, tag: string) =>
      slots.run(owner, () => {
        order.push(tag);
        return new Promise<void>((r) => gates.push(r));
      });
    // a fills both slots and queues four more; b and c queue one each behind them.
    const all = [job("a", "a1"), job("a", "a2"), job("a", "a3"), job("a", "a4"), job("b", "b1"), job("c", "c1"), job("a", "a5")];
    await tick();
    expect(order).toEqual(["a1", "a2"]);
    gates.shift()!();
    await tick();
    gates.shift()!();
    await tick();
    // a was first in line, then b and c take their turns before a again.
    expect(order).toEqual(["a1", "a2", "a3", "b1"]);
    while (gates.length > 0) {
      gates.shift()!();
      await tick();
      await tick();
    }
    await Promise.all(all);
    expect(order).toEqual(["a1", "a2", "a3", "b1", "c1", "a4", "a5"]);
    expect(slots.usage()).toEqual({ used: 0, byOwner: {} });
  });

  it("keeps an owner at its cap while slots stay free for others", async () => {
    const slots = new FairSlots(4, 1);
    let running = 0;
    let peak = 0;
    const release: Array<() => void> = [];
    const runs = Array.from({ length: 3 }, () =>
      slots.run("a", async () => {
        peak = Math.max(peak, ++running);
        await new Promise<void>((r) => release.push(r));
        running--;
      }),
    );
    await tick();
    expect(peak).toBe(1);
    let other = false;
    await slots.run("b", async () => void (other = true));
    expect(other).toBe(true);
    while (release.length > 0) {
      release.shift()!();
      await tick();
      await tick();
    }
    await Promise.all(runs);
    expect(peak).toBe(1);
  });

  it("an abort while waiting leaves the line without taking a slot", async () => {
    const slots = new FairSlots(1, 1);
    let open!: () => void;
    const first = slots.run("a", () => new Promise<void>((r) => (open = r)));
    const ac = new AbortController();
    const waiting = slots.run("a", async () => "ran", ac.signal);
    ac.abort(new Error("job killed"));
    await expect(waiting).rejects.toThrow("job killed");
    open();
    await first;
    expect(slots.usage()).toEqual({ used: 0, byOwner: {} });
    await expect(slots.run("a", async () => "next")).resolves.toBe("next");
  });
});
