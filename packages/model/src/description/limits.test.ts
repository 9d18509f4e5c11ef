import { describe, expect, it } from "vitest";
import { DescriptionError } from "../errors.js";
import { parseDescriptionsSettled, type SettledDescription } from "./index.js";
import { DESCRIPTION_LIMITS } from "./limits.js";

const ok = "&(executable=/bin/true)";
const failure = (item: SettledDescription | undefined): DescriptionError => {
  if (!item || item.ok) throw new Error("expected a failed item");
  return item.error;
};
const thrown = (f: () => unknown): DescriptionError => {
  try {
    f();
  } catch (e) {
    if (e instanceof DescriptionError) return e;
    throw e;
  }
  throw new Error("expected an error");
};

/** `(rsl_substitution=("V1" "xxxx"))(rsl_substitution=("V2" $(V1)$(V1)))…`: doubles each step. */
function doubling(steps: number, seed = "x".repeat(64)): string {
  let s = `&(executable=/bin/true)(rsl_substitution=("V0" "${seed}"))`;
  for (let i = 1; i <= steps; i++) s += `(rsl_substitution=("V${i}" $(V${i - 1})#$(V${i - 1})))`;
  return `${s}(arguments=$(V${steps}))`;
}

describe("expansion caps (xRSL)", () => {
  it("a doubling chain fails per item naming the cap, long before it is built", () => {
    const t0 = performance.now();
    const [item] = parseDescriptionsSettled(doubling(40));
    const e = failure(item);
    expect(e.code).toBe("LIMIT_EXCEEDED");
    expect(e.message).toMatch(/limit maxValueChars=131072/);
    expect(performance.now() - t0).toBeLessThan(1000);
    // Within the caps the same shape is fine.
    expect(parseDescriptionsSettled(doubling(4))[0]?.ok).toBe(true);
  });

  it("many references to one big variable hit the per-description total", () => {
    const v = "y".repeat(100 * 1024);
    const refs = " $(B)".repeat(40);
    const [item] = parseDescriptionsSettled(`&(executable=/bin/true)(rsl_substitution=("B" "${v}"))(arguments=${refs})`);
    expect(failure(item).message).toMatch(/limit maxExpandedChars=1048576/);
  });

  it("the body total is shared by every description of a + bundle", () => {
    // 6 × 128,000 = 768,000 characters per part (< 1 MiB); the 11th part passes 8 MiB.
    const v = "z".repeat(128_000);
    const part = `(&(executable=/bin/true)(rsl_substitution=("B" "${v}"))(arguments=$(B) $(B) $(B) $(B) $(B)))`;
    const items = parseDescriptionsSettled(`+${part.repeat(12)}`, { maxBytes: 16 * 1024 * 1024 });
    expect(items.slice(0, 10).every((i) => i.ok)).toBe(true);
    expect(failure(items[11]).message).toMatch(/limit maxTotalExpandedChars=8388608/);
  });

  it("variables defined through too many other variables, and too many variables", () => {
    let deep = `${ok}(rsl_substitution=("V0" "a"))`;
    for (let i = 1; i <= 40; i++) deep += `(rsl_substitution=("V${i}" $(V${i - 1})))`;
    expect(failure(parseDescriptionsSettled(deep)[0]).message).toMatch(/limit maxSubstitutionDepth=32/);
    const many = `${ok}(rsl_substitution=${Array.from({ length: 1001 }, (_, i) => `("N${i}" "v")`).join("")})`;
    expect(failure(parseDescriptionsSettled(many)[0]).message).toMatch(/limit maxVariables=1000/);
  });

  it("redefining one variable over and over is bounded as well", () => {
    const again = `(rsl_substitution=("A" $(A)#$(A)))`.repeat(30);
    const [item] = parseDescriptionsSettled(`${ok}(rsl_substitution=("A" "${"q".repeat(100)}"))${again}(arguments=$(A))`);
    expect(failure(item).code).toBe("LIMIT_EXCEEDED");
  });

  it("huge lists and deep nesting are per-item errors naming the cap", () => {
    const list = `${ok}(arguments=${"a ".repeat(10_001)})`;
    expect(failure(parseDescriptionsSettled(list)[0]).message).toMatch(/limit maxListItems=10000/);
    const deep = `${ok}(arguments=${"(".repeat(100)}${")".repeat(100)})`;
    expect(failure(parseDescriptionsSettled(deep)[0]).message).toMatch(/limit maxDepth=64/);
  });

  it("too many descriptions or syntax nodes refuse the whole body", () => {
    const many = `+${`(${ok})`.repeat(DESCRIPTION_LIMITS.maxDescriptions + 1)}`;
    expect(thrown(() => parseDescriptionsSettled(many)).message).toMatch(/limit maxDescriptions=1000/);
    const nodes =
      `+(${ok}(arguments=${"a ".repeat(9_000)}))`.repeat(1).replace(/^\+/, "+") + `(${ok}(arguments=${"b ".repeat(9_000)}))`.repeat(30);
    expect(thrown(() => parseDescriptionsSettled(nodes)).message).toMatch(/limit maxNodes=200000/);
  });
});

describe("one broken description does not sink the others", () => {
  it("xRSL +: a part with a syntax error fails alone, the parser resumes after it", () => {
    const items = parseDescriptionsSettled(`+(${ok})(&(executable /bin/x)(arguments="(a b)"))(&(=x))(${ok})`);
    expect(items.map((i) => i.ok)).toEqual([true, false, false, true]);
    expect(failure(items[1]).message).toMatch(
      /^xRSL syntax error at line 1, column \d+: expected an operator .* after attribute .executable./,
    );
    expect(failure(items[2]).message).toMatch(/expected an attribute name/);
    // An unterminated string swallows the rest: nothing after it can be told apart.
    const open = parseDescriptionsSettled(`+(${ok})(&(executable="/bin/x))(${ok})`);
    expect(open.map((i) => i.ok)).toEqual([true, false]);
  });

  it("xRSL +: junk after the last part is one more failed item", () => {
    const items = parseDescriptionsSettled(`+(${ok})(${ok}) trailing`);
    expect(items.map((i) => i.ok)).toEqual([true, true, false]);
    expect(failure(items[2]).message).toMatch(/Junk at end/);
  });

  it("ADL bundle: a child that is not well-formed fails alone; the others keep the root namespaces", () => {
    const ad = (name: string) =>
      `<adl:ActivityDescription><adl:ActivityIdentification><adl:Name>${name}</adl:Name></adl:ActivityIdentification><adl:Application><adl:Executable><adl:Path>/bin/true</adl:Path></adl:Executable></adl:Application></adl:ActivityDescription>`;
    const broken = "<adl:ActivityDescription><adl:Application><adl:Executable></adl:Application></adl:ActivityDescription>";
    const body = `<adl:ActivityDescriptions xmlns:adl="http://www.eu-emi.eu/es/2010/12/adl">${ad("a")}${broken}${ad("c")}</adl:ActivityDescriptions>`;
    const items = parseDescriptionsSettled(body);
    expect(items.map((i) => i.ok)).toEqual([true, false, true]);
    expect(items.map((i) => (i.ok ? i.description.jobName : undefined))).toEqual(["a", undefined, "c"]);
    expect(failure(items[1]).code).toBe("ADL_SYNTAX");
    expect(items[0]?.source).toContain('xmlns:adl="http://www.eu-emi.eu/es/2010/12/adl"');
  });

  it("ADL caps: deep, wide and long", () => {
    const wrap = (inner: string) => `<ActivityDescription><Application>${inner}</Application></ActivityDescription>`;
    expect(failure(parseDescriptionsSettled(wrap("<a>".repeat(100) + "</a>".repeat(100)))[0]).message).toMatch(/limit maxDepth=64/);
    expect(failure(parseDescriptionsSettled(wrap("<Argument/>".repeat(10_001)))[0]).message).toMatch(/limit maxListItems=10000/);
    const long = wrap(`<Executable><Path>${"p".repeat(128 * 1024 + 1)}</Path></Executable>`);
    expect(failure(parseDescriptionsSettled(long)[0]).message).toMatch(/limit maxValueChars=131072/);
    const many = `<ActivityDescriptions>${wrap("").repeat(1001)}</ActivityDescriptions>`;
    expect(thrown(() => parseDescriptionsSettled(many)).message).toMatch(/limit maxDescriptions=1000/);
  });
});

describe("pathological 5 MiB bodies are read in linear time", () => {
  const M = 5 * 1024 * 1024 - 64 * 1024;
  it.each([
    ["999 broken + parts far apart", "+" + ("\n".repeat(5000) + "(&(=x))").repeat(999)],
    ["a text of quotes", "&(a=" + '"'.repeat(M) + ")"],
    ["tags that never close", "<ActivityDescriptions>" + "<ActivityDescription ".repeat(M / 21)],
    ["unterminated bundle children", "<ActivityDescriptions>" + "<ActivityDescription><a>".repeat(999) + " ".repeat(M - 30_000)],
  ])("%s", (_, body) => {
    const t0 = performance.now();
    try {
      parseDescriptionsSettled(body);
    } catch (e) {
      if (!(e instanceof DescriptionError)) throw e;
    }
    // Quadratic behaviour takes minutes here; linear takes well under a second.
    expect(performance.now() - t0).toBeLessThan(5000);
  });
});
