import { spawnSync } from "node:child_process";
import { mkdtempSync, openSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino, { type Logger } from "pino";
import { afterAll, describe, expect, it } from "vitest";
import type { CompiledConfig } from "@ce/config";
import { LOG_FLUSH_MS, createLogger } from "../src/server.js";
import { waitFor } from "@ce/testing";

// The gateway's log destination writes lines in blocks (server.ts createLogger): they must still
// all arrive, soon, without keeping a process alive, and on exit (also a crashing one).
const dir = mkdtempSync(join(tmpdir(), "ce-logblocks-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const config = { logging: { level: "info" } } as CompiledConfig;
const server = new URL("../src/server.ts", import.meta.url).pathname;
/** Stops a test logger's destination (its timer) and closes its file. */
const close = (log: Logger) => (log as unknown as Record<symbol, { destroy(): void }>)[pino.symbols.streamSym]!.destroy();
const lines = (file: string) =>
  readFileSync(file, "utf8")
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l) as { msg: string; n?: number });

/** Runs `body` in a fresh Node with `log` = createLogger writing to `file`; returns how it ended. */
function child(file: string, body: string) {
  const code = `const { createLogger } = await import(${JSON.stringify(server)});
const fd = (await import("node:fs")).openSync(${JSON.stringify(file)}, "w");
const log = createLogger({ logging: { level: "info" } }, fd);
${body}`;
  const t = Date.now();
  const r = spawnSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", code], { encoding: "utf8", timeout: 30_000 });
  return { status: r.status, signal: r.signal, ms: Date.now() - t, stderr: r.stderr };
}

describe("gateway log destination (blocks)", () => {
  it("a few lines, then quiet: they reach the file within the flush period", async () => {
    const file = join(dir, "quiet.log");
    const fd = openSync(file, "w");
    const log = createLogger(config, fd);
    for (let n = 0; n < 3; n++) log.info({ n }, "request");
    // Nothing else writes: the flush timer alone must bring them out.
    await waitFor("3 lines in the file", () => lines(file).length >= 3, LOG_FLUSH_MS * 20);
    expect(lines(file).map((l) => l.n)).toEqual([0, 1, 2]);
    close(log);
  });

  it("many lines: every line arrives, in order", async () => {
    const file = join(dir, "many.log");
    const fd = openSync(file, "w");
    const log = createLogger(config, fd);
    for (let n = 0; n < 5_000; n++) log.info({ n }, "request");
    await waitFor("5,000 lines in the file", () => lines(file).length >= 5_000, LOG_FLUSH_MS * 20);
    expect(lines(file).map((l) => l.n)).toEqual(Array.from({ length: 5_000 }, (_, n) => n));
    close(log);
  });

  it("does not keep a process alive, and what waits is written when it ends by itself", () => {
    const file = join(dir, "ends.log");
    const r = child(file, `log.info({ n: 1 }, "last words");`);
    expect(r.status, r.stderr).toBe(0);
    expect(lines(file).map((l) => l.msg)).toEqual(["last words"]);
  });

  it("lines logged before an uncaught exception are written", () => {
    const file = join(dir, "crash.log");
    const r = child(file, `for (let n = 0; n < 3; n++) log.info({ n }, "before"); setTimeout(() => { throw new Error("boom"); }, 1);`);
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain("boom");
    expect(lines(file).map((l) => l.n)).toEqual([0, 1, 2]);
  });

  it("process.exit writes what waits", () => {
    const file = join(dir, "exit.log");
    const r = child(file, `log.info({ n: 7 }, "bye"); process.exit(3);`);
    expect(r.status).toBe(3);
    expect(lines(file).map((l) => l.n)).toEqual([7]);
  });
});
