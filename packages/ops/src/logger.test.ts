import { Writable } from "node:stream";
import { Redis } from "ioredis";
import { describe, expect, inject, it } from "vitest";
import { createLogger } from "./logger.js";

function capture() {
  const lines: string[] = [];
  const dest = new Writable({
    write(chunk, _enc, cb) {
      lines.push(String(chunk));
      cb();
    },
  });
  return { lines, log: createLogger("jem", "debug", {}, dest) };
}

describe("logger redaction", () => {
  it("a failed Redis AUTH is logged without the password ioredis attaches to the error", async () => {
    const { lines, log } = capture();
    const r = new Redis({
      port: inject("redisPort"),
      host: "127.0.0.1",
      username: "jem",
      password: "PW-MUST-NOT-LEAK-42",
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    });
    r.on("error", (err) => log.warn({ err }, "redis error"));
    await r.connect().catch((err: unknown) => log.warn({ err, ctx: { err } }, "connect failed"));
    r.disconnect();
    const out = lines.join("");
    expect(out).toMatch(/WRONGPASS/); // the error itself is logged
    expect(out).toMatch(/"command":\{"name":"auth"\}/);
    expect(out).not.toContain("PW-MUST-NOT-LEAK-42");
  });

  it("credential fields are censored wherever they sit", () => {
    const { lines, log } = capture();
    log.info({ token: "tok-1", password: "p-2", headers: { authorization: "Bearer t-3" }, job: { proxyPem: "-----BEGIN p-4" } }, "x");
    const out = lines.join("");
    for (const s of ["tok-1", "p-2", "t-3", "p-4"]) expect(out).not.toContain(s);
  });
});
