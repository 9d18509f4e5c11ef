import pino from "pino";
import { afterEach, expect, it } from "vitest";
import { startRedis, type RedisHandle } from "@ce/testing/redis";
import { shellJob, submitTestJob, testEnv, testJem, waitForRest } from "./helpers.js";
import { quietPeriod } from "@ce/testing";

let redis: RedisHandle | undefined;
afterEach(async () => {
  await redis?.stop();
  redis = undefined;
});

// Redis trouble is not a crash, at boot too: the outage test (tests/redis-outage.test.ts)
// covers a running CE; here the JEM starts while its redis-server is away.
it("a JEM started while Redis is away waits for it (one episode line each way), then works", async () => {
  redis = await startRedis();
  const r = redis;
  const env = await testEnv({ redis: { url: r.url } });
  env.redis.on("error", () => undefined); // the harness' own connection; the JEM's are under test
  await r.kill();
  let log = "";
  const logger = pino({ level: "info" }, { write: (l: string) => void (log += l) });
  const started = testJem(env, { logger });
  let booted = false;
  void started.then(() => (booted = true));
  await quietPeriod(2_000, "without Redis the JEM must keep waiting, not finish booting");
  expect(booted).toBe(false);
  await r.restart();
  const jem = await started;
  try {
    const id = await submitTestJob(env, shellJob("true"));
    expect((await waitForRest(env, id, "FINISHED"))?.exitCode).toBe(0);
    expect(log.match(/redis unavailable since/g)).toHaveLength(1);
    expect(log.match(/redis back after/g)).toHaveLength(1);
  } finally {
    await jem.stop();
    await env.close();
  }
}, 60_000);
