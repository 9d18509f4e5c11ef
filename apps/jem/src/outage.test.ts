import { randomBytes } from "node:crypto";
import { Redis } from "ioredis";
import pino from "pino";
import { afterEach, describe, expect, inject, it } from "vitest";
import { createOutage } from "./outage.js";

// Against the test redis-server: when the JEM rings every active job again (daemon.ts afterEpisode).
// The episode's write probe leaves one key under a fresh prefix; it expires by itself (60 s).
const prefix = `{t${randomBytes(6).toString("hex")}}`;
let redis: Redis | undefined;
afterEach(() => redis?.disconnect());

describe("JEM outage episodes", () => {
  it("a reconnect without an episode (a graceful failover) rings every active job once; the first connect does not", async () => {
    redis = new Redis(inject("redisUrl"));
    let rings = 0;
    const outage = createOutage(redis, prefix, pino({ level: "silent" }), { afterEpisode: () => rings++ });
    await new Promise((r) => redis!.once("ready", r));
    expect(rings).toBe(0);
    // What ioredis' failover detector does on +switch-master: drop the connection and connect again.
    redis.disconnect(true);
    await new Promise((r) => redis!.once("ready", r));
    expect(outage.down).toBe(false);
    expect(rings).toBe(1);
    outage.stop();
  });

  it("a reconnect during an episode leaves the ring to the episode's end (one ring, not two)", async () => {
    redis = new Redis(inject("redisUrl"));
    let rings = 0;
    const outage = createOutage(redis, prefix, pino({ level: "silent" }), { afterEpisode: () => rings++ });
    await new Promise((r) => redis!.once("ready", r));
    outage.report(Object.assign(new Error("read ECONNRESET"), { code: "ECONNRESET" }));
    expect(outage.down).toBe(true);
    redis.disconnect(true);
    await new Promise((r) => redis!.once("ready", r));
    outage.nudge();
    await outage.waitUntilUp();
    expect(rings).toBe(1);
    outage.stop();
  });
});
