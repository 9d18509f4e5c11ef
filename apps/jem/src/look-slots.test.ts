import { describe, expect, it } from "vitest";
import { Doorbell } from "./doorbell.js";
import { LookSlots } from "./look-slots.js";

describe("LookSlots", () => {
  it("a look coming back gets the next freed slot before any new claim, and claims see no free slot meanwhile", async () => {
    let freed = 0;
    const s = new LookSlots(2, () => freed++);
    s.reserve(2); // a claim took both
    expect(s.free).toBe(0);
    s.give(); // look A goes outside its slot (a batch wait)
    expect(s.free).toBe(1);
    expect(freed).toBe(1);
    s.reserve(1); // the loop claims a new look into it
    let back = false;
    const returning = s.take().then(() => (back = true)); // A comes back: all slots busy, it waits
    await Promise.resolve();
    expect(back).toBe(false);
    expect(s.free).toBe(-1); // a waiting look counts against new claims
    s.give(); // a look ends: its slot goes to A, not to the pool
    await returning;
    expect(back).toBe(true);
    expect(freed).toBe(1);
    expect(s.held).toBe(2);
    expect(s.free).toBe(0);
  });

  it("unused reservations go back quietly, to waiting looks first", async () => {
    let freed = 0;
    const s = new LookSlots(3, () => freed++);
    s.reserve(3);
    const waiting = s.take();
    s.give(true); // the claim found fewer jobs than it reserved
    await waiting;
    s.give(true);
    expect(s.held).toBe(2);
    expect(freed).toBe(0);
  });
});

describe("Doorbell", () => {
  it("a ring wakes a sleep at once; a ring while awake is kept for the next sleep, once", async () => {
    const d = new Doorbell();
    let t0 = Date.now();
    const sleeping = d.sleep(10_000);
    d.ring();
    await sleeping;
    expect(Date.now() - t0).toBeLessThan(1_000);
    d.ring(); // nobody asleep: kept
    d.ring(); // rings collapse
    t0 = Date.now();
    await d.sleep(10_000);
    expect(Date.now() - t0).toBeLessThan(1_000);
    t0 = Date.now();
    await d.sleep(50); // the kept ring was used up: this one runs to its timeout
    expect(Date.now() - t0).toBeGreaterThanOrEqual(45);
  });
});
