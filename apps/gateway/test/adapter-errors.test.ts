import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { startTestGateway, type TestGateway } from "./harness.js";

// Requests the Node adapter refuses before the app runs still name the problem.
describe("requests refused before routing", () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway(inject("redisUrl"));
  });
  afterAll(async () => t?.close());

  it("a backslash in the request path is a 400 with a reason and an error code", async () => {
    const r = await t.raw(`GET ${t.rest}/1.0/jobs\\x HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n`);
    expect(r.status).toBe(400);
    expect(r.head).toMatch(/^x-error-code: BAD_REQUEST_TARGET$/im);
    expect(JSON.parse(r.body).reason).toMatch(/Backslash in request path/);
  });
});
