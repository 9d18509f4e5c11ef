import { describe, expect, it } from "vitest";
import { reasonLine } from "./component.js";

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
