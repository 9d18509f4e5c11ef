import { describe, expect, it } from "vitest";
import {
  AdlSyntaxError,
  DescriptionError,
  DescriptionTooLargeError,
  InvalidDescriptionError,
  UnsupportedFormatError,
  XrslSyntaxError,
  isDescriptionError,
  positionAt,
} from "./errors.js";

describe("description errors", () => {
  it("keep their class, name, code and position", () => {
    const pos = positionAt("ab\ncd\nef", 4);
    expect(pos).toEqual({ offset: 4, line: 2, column: 2 });
    const cases: Array<[DescriptionError, string, string]> = [
      [new XrslSyntaxError("expected ')'", pos), "XrslSyntaxError", "XRSL_SYNTAX"],
      [new AdlSyntaxError("bad", pos), "AdlSyntaxError", "ADL_SYNTAX"],
      [new InvalidDescriptionError("bad value", "cputime"), "InvalidDescriptionError", "INVALID_DESCRIPTION"],
      [new DescriptionTooLargeError(10, 5), "DescriptionTooLargeError", "TOO_LARGE"],
      [new UnsupportedFormatError("what"), "UnsupportedFormatError", "UNSUPPORTED_FORMAT"],
    ];
    for (const [e, name, code] of cases) {
      expect(e).toBeInstanceOf(DescriptionError);
      expect(e).toBeInstanceOf(Error);
      expect(e.name).toBe(name);
      expect(e.code).toBe(code);
      expect(isDescriptionError(e)).toBe(true);
    }
    expect(new XrslSyntaxError("expected ')'", pos).message).toBe("xRSL syntax error at line 2, column 2: expected ')'");
    expect(new AdlSyntaxError("bad").message).toBe("ADL syntax error: bad");
    expect(new InvalidDescriptionError("x", "cputime").field).toBe("cputime");
    expect(isDescriptionError(new Error("x"))).toBe(false);
  });

  it("positionAt clamps and counts columns from 1", () => {
    expect(positionAt("abc", 0)).toEqual({ offset: 0, line: 1, column: 1 });
    expect(positionAt("a\n", 99)).toEqual({ offset: 2, line: 2, column: 1 });
  });
});
