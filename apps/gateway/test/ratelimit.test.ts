import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { startTestGateway, type TestGateway } from "./harness.js";

// The request token bucket (@ce/store RateLimiter, lua/token-bucket.lua) through the real gateway.
let t: TestGateway;
beforeAll(async () => {
  t = await startTestGateway(inject("redisUrl"), { gateway: { limits: { requestsPerSecond: 0.5, requestBurst: 2 } } });
});
afterAll(async () => t?.close());

describe("rate limit", () => {
  it("answers 429 with Retry-After and a reason once an identity's burst is spent; others keep their own bucket", async () => {
    const jobs = `${t.rest}/1.1/jobs`;
    for (let i = 0; i < 2; i++) expect((await t.request("GET", jobs, { accept: "application/json" })).status).toBe(200);
    const over = await t.request("GET", jobs, { accept: "application/json" });
    expect(over.status).toBe(429);
    expect(over.headers["x-error-code"]).toBe("RATE_LIMITED");
    expect(Number(over.headers["retry-after"])).toBeGreaterThanOrEqual(1);
    expect(Number(over.headers["retry-after"])).toBeLessThanOrEqual(2);
    expect(over.json().reason).toMatch(/Too many requests; retry after \d+ s/);
    expect((await t.request("GET", jobs, { accept: "application/json", as: "bob" })).status).toBe(200);
  });
});
