import { Redis } from "ioredis";
import pino from "pino";
import { AccountingDb } from "./db/index.js";
import { UsageConsumer } from "./consumer.js";

/**
 * A consumer in a process of its own, for the crash test (consumer.test.ts): with
 * KILL_AFTER_COMMIT=1 it SIGKILLs itself right after its first database commit, before the
 * stream acknowledgement: the worst moment for a crash.
 */
const env = process.env;
const redis = new Redis(env.REDIS_URL!);
const db = await AccountingDb.open(env.DB_PATH!, "/nonexistent");
if (env.KILL_AFTER_COMMIT === "1") {
  const insert = db.insert.bind(db);
  db.insert = async (recs) => {
    const added = await insert(recs);
    if (added.length) process.kill(process.pid, "SIGKILL");
    return added;
  };
}
const c = new UsageConsumer({
  redis,
  prefix: env.PREFIX!,
  db,
  consumer: env.CONSUMER!,
  claimIdleMs: Number(env.CLAIM_IDLE_MS ?? 60_000),
  vomslessVo: "vomsless",
  log: pino({ level: "silent" }),
  blockMs: 50,
});
await c.ensureGroup();
while ((await c.step(false)) > 0);
await db.close();
redis.disconnect();
