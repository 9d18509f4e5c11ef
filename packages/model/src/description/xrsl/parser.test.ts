import { describe, expect, it } from "vitest";
import { XrslSyntaxError } from "../../errors.js";
import type { RslBoolean, RslRelation } from "./ast.js";
import { evaluateJob, splitJobs } from "./evaluate.js";
import { parseRsl } from "./parser.js";

/** Evaluated values of every relation, keyed by normalized attribute name. */
function values(text: string): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const r of evaluateJob(parseRsl(text), text)) out[r.attribute] = r.values;
  return out;
}

function syntaxError(text: string): XrslSyntaxError {
  try {
    parseRsl(text);
  } catch (e) {
    expect(e).toBeInstanceOf(XrslSyntaxError);
    return e as XrslSyntaxError;
  }
  throw new Error(`expected a syntax error for ${text}`);
}

describe("RSL structure", () => {
  it("parses & with relations and records spans", () => {
    const text = '&(executable="/bin/echo")(arguments=a b)';
    const root = parseRsl(text) as RslBoolean;
    expect(root.kind).toBe("boolean");
    expect(root.op).toBe("&");
    expect(root.children).toHaveLength(2);
    const first = root.children[0] as RslRelation;
    expect(first.attribute).toBe("executable");
    expect(text.slice(first.start, first.end)).toBe('(executable="/bin/echo")');
  });

  it("normalizes attribute names: case-insensitive, underscores removed", () => {
    const root = parseRsl("&(runTime_Environment=X)(RSL_SUBSTITUTION=(A B))") as RslBoolean;
    const [a, b] = root.children as RslRelation[];
    expect(a?.attribute).toBe("runtimeenvironment");
    expect(a?.rawAttribute).toBe("runTime_Environment");
    expect(b?.attribute).toBe("rslsubstitution");
  });

  it("reads all six operators", () => {
    const root = parseRsl("&(a=1)(b!=2)(c<3)(d>4)(e<=5)(f>=6)") as RslBoolean;
    expect((root.children as RslRelation[]).map((r) => r.op)).toEqual(["=", "!=", "<", ">", "<=", ">="]);
  });

  it("accepts a top-level + of several jobs and splits them", () => {
    const text = "+(&(executable=a))(&(executable=b))";
    const jobs = splitJobs(parseRsl(text));
    expect(jobs).toHaveLength(2);
    expect(jobs.map((j) => text.slice(j.start, j.end))).toEqual(["&(executable=a)", "&(executable=b)"]);
  });

  it("rejects + below the top level", () => {
    expect(syntaxError("&(+(a=1))").detail).toMatch(/only allowed at the top level/);
  });

  it("takes the first alternative of | at the top and inside &", () => {
    expect(values("|(&(a=1))(&(a=2))")).toEqual({ a: ["1"] });
    expect(values('&(x=0)(|(executables="in1")(executables="in2"))')).toEqual({ x: ["0"], executables: ["in1"] });
  });

  it("reads (a=b)(c=d) without a leading operator as &", () => {
    expect(values("(a=1)(b=2)")).toEqual({ a: ["1"], b: ["2"] });
  });
});

describe("RSL values", () => {
  it("handles the three quoting forms with their escapes", () => {
    expect(values(`&(a="say ""hi""")(b='it''s')(c=^!a "quoted" 'x'!)`)).toEqual({
      a: ['say "hi"'],
      b: ["it's"],
      c: [`a "quoted" 'x'`],
    });
  });

  it("keeps bare words with URL punctuation; '=' needs quotes", () => {
    expect(values("&(a=gsiftp://host:2811/path/f-1.txt;x,y@z*)")).toEqual({ a: ["gsiftp://host:2811/path/f-1.txt;x,y@z*"] });
    expect(values('&(a="gsiftp://host;cache=no/path")')).toEqual({ a: ["gsiftp://host;cache=no/path"] });
  });

  it("stops bare words at special characters", () => {
    expect(syntaxError("&(a=b=c)").detail).toMatch(/expected a value, found '='/);
  });

  it("builds lists of lists", () => {
    expect(values('&(inputfiles=("a" "") ("b" "http://h/b" "threads=2"))')).toEqual({
      inputfiles: [
        ["a", ""],
        ["b", "http://h/b", "threads=2"],
      ],
    });
    expect(values("&(x=(1 (2 3)) 4)")).toEqual({ x: [["1", ["2", "3"]], "4"] });
  });

  it("reads juxtaposed sequences as separate items", () => {
    expect(values('&(inputfiles=("a" "")("b" ""))')).toEqual({
      inputfiles: [
        ["a", ""],
        ["b", ""],
      ],
    });
  });

  it("concatenates with # (with or without blanks) and by juxtaposition", () => {
    expect(values('&(a="x" # "y")(b=x#y#"z")(c="p"\'q\')(d=ab"cd")')).toEqual({
      a: ["xy"],
      b: ["xyz"],
      c: ["pq"],
      d: ["abcd"],
    });
  });

  it("substitutes rsl_substitution variables, also inside later definitions", () => {
    const text = `&(rsl_substitution=("TOP" "/data"))
      (rsl_substitution=("DIR" $(TOP)/run))
      (executable=$(DIR)/bin/job)
      (arguments=$(TOP) # "/x" pre$(TOP))`;
    expect(values(text)).toEqual({ executable: ["/data/run/bin/job"], arguments: ["/data/x", "pre/data"] });
  });

  it("reports an undefined variable with its position", () => {
    const text = "&(executable=$(NOPE))";
    expect(() => evaluateJob(parseRsl(text), text)).toThrow(/undefined variable \$\(NOPE\) at line 1, column 14/);
  });

  it("rejects a badly shaped rsl_substitution", () => {
    const text = '&(rsl_substitution=("A"))';
    expect(() => evaluateJob(parseRsl(text), text)).toThrow(/\("NAME" "value"\)/);
  });

  it("rejects # next to a list", () => {
    expect(syntaxError("&(a=(1 2) # x)").detail).toMatch(/cannot be concatenated/);
  });
});

describe("RSL comments", () => {
  it("skips (* *) comments anywhere whitespace may appear", () => {
    const text = "(* head *)&(* a *)(executable=(* b *)/bin/true (* c *))(* tail *)";
    expect(values(text)).toEqual({ executable: ["/bin/true"] });
  });

  it("does not treat (* inside quotes as a comment", () => {
    expect(values('&(a="(* not a comment *)")')).toEqual({ a: ["(* not a comment *)"] });
  });

  it("reports an unterminated comment where it starts", () => {
    const e = syntaxError("&(a=1)\n  (* never closed");
    expect(e.message).toBe("xRSL syntax error at line 2, column 3: unterminated comment: '(*' without a closing '*)'");
    expect(e.code).toBe("XRSL_SYNTAX");
    expect(e.position).toEqual({ offset: 9, line: 2, column: 3 });
  });
});

describe("RSL syntax errors", () => {
  it.each([
    ["", /the description is empty/],
    ["executable=/bin/true", /expected '&', '\|' or '\+' at the start/],
    ["&", /expected '\(' after '&'/],
    ["&(=x)", /expected an attribute name/],
    ["&(a x)", /expected an operator \(=, !=, <, >, <=, >=\) after attribute 'a'/],
    ["&(a=1", /expected '\)' after value list, found end of text/],
    ['&(a="x)', /unterminated quoted string/],
    ["&(a=^|abc)", /no closing '\|' for '\^\|'/],
    ["&(a=$X)", /variable references are written \$\(NAME\)/],
    ["&(a=(1 2)", /expected '\)' after value list/],
    ["&(a=(1 2", /expected '\)' to close the value list/],
  ])("%j fails with %s", (text, re) => {
    expect(syntaxError(text).detail).toMatch(re);
  });

  it("reports junk after the description with its position", () => {
    const e = syntaxError("&(a=1)\n(b=2) junk");
    // `(b=2)` after a complete & group is not junk only if part of the group; here it continues it.
    expect(e.detail).toMatch(/^Junk at end of RSL/);
    expect(e.position).toMatchObject({ line: 2, column: 7 });
  });

  it("gives line and column of a missing ')' in a multi-line text", () => {
    const e = syntaxError('&(executable="/bin/echo")\n (arguments="a"\n  (stdout=x)');
    expect(e.message).toBe(
      "xRSL syntax error at line 3, column 10: expected a value, found '=' (is a ')' missing before it, or should the value be quoted?)",
    );
  });

  it("refuses absurdly deep nesting instead of exhausting the stack", () => {
    for (const deep of ["&" + "(&".repeat(10000) + "(a=1)" + ")".repeat(10000), "&(a=" + "(".repeat(10000) + ")".repeat(10000) + ")"]) {
      expect(() => parseRsl(deep)).toThrow(/limit maxDepth=64: the description is nested more than 64 levels deep/);
    }
    expect(() => parseRsl("&" + "(&".repeat(30) + "(a=1)" + ")".repeat(30))).not.toThrow();
  });

  it("reports junk after a closed + body", () => {
    expect(syntaxError("+(&(a=1)) &(b=2)").detail).toMatch(/Junk at end of RSL: unexpected '&'/);
  });
});
