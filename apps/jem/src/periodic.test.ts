import { pino } from "pino";
import { RedisOutage } from "@ce/store";
import { describe, expect, it } from "vitest";
import { every } from "./periodic.js";

const deps = () => ({
  // A real outage tracker whose Redis answers every probe: it only opens an episode when told.
  outage: new RedisOutage({ probe: async () => "OK", onDown: () => undefined, onUp: () => undefined }),
  log: pino({ level: "silent" }),
});

describe("every", () => {
  it("never runs a pass while the previous one still runs, and stop waits for the one in progress", async () => {
    let running = 0;
    let most = 0;
    let turns = 0;
    let ended = 0;
    const p = every(
      10,
      "slow pass",
      async () => {
        turns++;
        most = Math.max(most, ++running);
        await new Promise((r) => setTimeout(r, 60));
        running--;
        ended++;
      },
      deps(),
    );
    await expect.poll(() => turns, { timeout: 2_000 }).toBeGreaterThanOrEqual(2);
    await p.stop();
    expect(most).toBe(1);
    expect(ended).toBe(turns);
    const after = turns;
    await new Promise((r) => setTimeout(r, 50)); // stopped: no more turns
    expect(turns).toBe(after);
  });

  it("skips its turns during a Redis outage and keeps going after a failed pass", async () => {
    const d = deps();
    let turns = 0;
    const p = every(
      10,
      "failing pass",
      async () => {
        turns++;
        throw new Error("disk full");
      },
      d,
    );
    await expect.poll(() => turns, { timeout: 2_000 }).toBeGreaterThanOrEqual(2);
    d.outage.report(Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:1"), { code: "ECONNREFUSED" }));
    expect(d.outage.down).toBe(true);
    const during = turns;
    await new Promise((r) => setTimeout(r, 60));
    expect(turns).toBeLessThanOrEqual(during + 1); // at most a turn already started
    await p.stop();
    d.outage.stop();
  });
});
