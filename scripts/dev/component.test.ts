import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { Component, reasonLine } from "./component.js";

describe("reasonLine", () => {
  it("prefers the start-up failure over a log record written after it", () => {
    const lines = [
      'jem: cannot start: lrms back end "slurmm": /x/submit is missing or not executable',
      JSON.stringify({ level: 30, msg: "mapping is on" }),
    ];
    expect(reasonLine(lines)).toBe(lines[0]);
  });

  it("takes the last error-level record when there is no start-up line", () => {
    const lines = [JSON.stringify({ level: 50, msg: "redis lost" }), JSON.stringify({ level: 30, msg: "bye" })];
    expect(reasonLine(lines)).toBe(lines[0]);
  });

  it("falls back to the last line, and to nothing for an empty log", () => {
    expect(reasonLine(["a", "b"])).toBe("b");
    expect(reasonLine([])).toBeUndefined();
  });
});

describe("Component start under a wrapper (bench/instr)", () => {
  it("puts CE_DEV_WRAP_<NAME> in front of node and CE_DEV_NODE_ARGS_<NAME> before the component's own arguments", async () => {
    const dir = mkdtempSync(join(tmpdir(), "ce-component-"));
    try {
      const out = join(dir, "out.json");
      const script = join(dir, "c.mjs");
      writeFileSync(
        script,
        `import { writeFileSync } from "node:fs"; writeFileSync(${JSON.stringify(out)}, JSON.stringify({ wrapped: process.env.WRAPPED, execArgv: process.execArgv, argv: process.argv.slice(2) }));`,
      );
      const env = { ...process.env, CE_DEV_WRAP_DEMO: "env WRAPPED=yes", CE_DEV_NODE_ARGS_DEMO: "--stack-size=2000" };
      const c = new Component("demo", "the demo", [script, "x"], env, join(dir, "log"), join(dir, "ready"), join(dir, "pid"));
      c.start();
      expect((await c.exited).code).toBe(0);
      expect(JSON.parse(readFileSync(out, "utf8"))).toEqual({ wrapped: "yes", execArgv: ["--stack-size=2000"], argv: ["x"] });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
