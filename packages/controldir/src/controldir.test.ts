import { describe, expect, it } from "vitest";
import { formatKeyValues, parseKeyValues, updateKeyValues } from "./controldir.js";

describe("control-file key=value texts", () => {
  const text = formatKeyValues([
    ["globalid", "j1"],
    ["notify", "a@x"],
    ["notify", "b@x"],
    ["voms", "/atlas/Role=production"],
    ["voms", "/atlas"],
    ["queue", "main"],
  ]);

  it("updates keep repeated keys (voms=, notify=) and the order of untouched lines", () => {
    const out = updateKeyValues(text, { localid: "123", queue: undefined });
    expect(out).toBe("globalid=j1\nnotify=a@x\nnotify=b@x\nvoms=/atlas/Role=production\nvoms=/atlas\nlocalid=123\n");
    expect(updateKeyValues(out, { localid: "456" })).toBe(
      "globalid=j1\nnotify=a@x\nnotify=b@x\nvoms=/atlas/Role=production\nvoms=/atlas\nlocalid=456\n",
    );
  });

  it("values with backslashes and newlines round-trip through format and update", () => {
    const t = updateKeyValues("", { args: "a\\nb\nc" });
    expect(parseKeyValues(t).args).toBe("a\\nb\nc");
    for (const v of ["x\\", "\\\\n", "a\n\\n\n"]) expect(parseKeyValues(formatKeyValues([["k", v]])).k).toBe(v);
  });
});
