import { describe, expect, it } from "vitest";
import * as model from "./index.js";

describe("@ce/model entry point", () => {
  it("exposes states, errors, parsers and validation together", () => {
    expect(model.toRestState({ state: "ACCEPTED", pending: false })).toBe("ACCEPTING");
    const [d] = model.parseDescriptions("&(executable=/bin/true)(walltime=2)");
    expect(d?.wallTimeSeconds).toBe(120);
    expect(model.normalizeSessionPath("a/./b")).toBe("a/b");
    expect(model.parseXrsl("&(executable=/bin/true)")).toHaveLength(1);
    expect(model.parseAdl("<ActivityDescription/>")).toHaveLength(1);
    expect(model.parseRsl("&(a=1)").kind).toBe("boolean");
    expect(() => model.validateDescription({ ...model.emptyDescription("emies:adl"), count: 0 })).toThrow(model.InvalidDescriptionError);
    expect(model.detectFormat("<x/>")).toBe("adl");
    expect(model.DEFAULT_MAX_DESCRIPTION_BYTES).toBe(5 * 1024 * 1024);
  });
});
