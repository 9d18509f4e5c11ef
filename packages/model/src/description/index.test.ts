import { describe, expect, it } from "vitest";
import { DescriptionError } from "../errors.js";
import { detectFormat, parseDescriptions, parseDescriptionsSettled } from "./index.js";

describe("detectFormat", () => {
  it.each([
    ["<ActivityDescription/>", "adl"],
    ["\n  <?xml version='1.0'?><x/>", "adl"],
    ["&(executable=/bin/true)", "xrsl"],
    ["+(&(a=1))", "xrsl"],
    ["  (* c *)&(a=1)", "xrsl"],
    ["{}", "json"],
    ["[1]", "json"],
    ["\uFEFF&(a=1)", "xrsl"],
    ["hello", "unknown"],
    ["   ", "unknown"],
  ])("%j → %s", (body, format) => {
    expect(detectFormat(body)).toBe(format);
  });
});

function thrown(fn: () => unknown): DescriptionError {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(DescriptionError);
    return e as DescriptionError;
  }
  throw new Error("expected an error");
}

describe("parseDescriptionsSettled", () => {
  it("parses and validates the hand-written xRSL from the transcript", () => {
    const [item] = parseDescriptionsSettled('&(executable="/bin/echo")(arguments="raw")(stdout="out.txt")(jobname="raw-curl")');
    expect(item?.ok).toBe(true);
    expect(item?.ok && item.description).toMatchObject({
      executable: "/bin/echo",
      arguments: ["raw"],
      stdout: "out.txt",
      jobName: "raw-curl",
    });
  });

  it("reports a validation failure per item and keeps the others", () => {
    const body =
      '+(&(executable="/bin/echo")(arguments="m1"))(&(executable="/bin/echo")(stdout="../../etc/x"))(&(executable=/bin/b)(count=0))';
    const items = parseDescriptionsSettled(body);
    expect(items.map((i) => i.ok)).toEqual([true, false, false]);
    const [, second, third] = items;
    expect(second?.ok === false && second.error.message).toMatch(/standard output file '..\/..\/etc\/x' leaves the session directory/);
    expect(second?.source).toBe('&(executable="/bin/echo")(stdout="../../etc/x")');
    expect(third?.ok === false && third.error.code).toBe("INVALID_DESCRIPTION");
  });

  it("validates ADL items too and normalizes them", () => {
    const body = `<ActivityDescriptions>
      <ActivityDescription><Application><Executable><Path>./run.sh</Path></Executable></Application>
        <DataStaging><InputFile><Name>run.sh</Name></InputFile></DataStaging></ActivityDescription>
      <ActivityDescription><DataStaging><InputFile><Name>/abs</Name></InputFile></DataStaging></ActivityDescription>
    </ActivityDescriptions>`;
    const items = parseDescriptionsSettled(body);
    expect(items.map((i) => i.ok)).toEqual([true, false]);
    expect(items[0]?.ok && items[0].description).toMatchObject({
      executable: "run.sh",
      inputFiles: [{ name: "run.sh", executable: true }],
    });
    expect(items[1]?.source).toMatch(/^<ActivityDescription><DataStaging>/);
  });

  it("a body that does not parse is one failed item (decisions #20), not a throw", () => {
    const one = (body: string) => {
      const items = parseDescriptionsSettled(body);
      expect(items).toHaveLength(1);
      const [it] = items;
      if (!it || it.ok) throw new Error("expected a failed item");
      return it.error;
    };
    expect(one('&(executable="x"').code).toBe("XRSL_SYNTAX");
    expect(one("<ActivityDescription>").code).toBe("ADL_SYNTAX");
    expect(one('{"executable":"x"}').code).toBe("UNSUPPORTED_FORMAT");
    expect(one("hello").message).toMatch(/not a job description/);
    expect(one("").code).toBe("UNSUPPORTED_FORMAT");
  });

  it("throws only for the body-wide caps", () => {
    const many = "+" + "(&(executable=/bin/true))".repeat(4);
    const e = thrown(() => parseDescriptionsSettled(many, { limits: { maxDescriptions: 3 } }));
    expect(e.code).toBe("LIMIT_EXCEEDED");
    expect(e.message).toMatch(/maxDescriptions=3/);
    expect(parseDescriptionsSettled(many, { limits: { maxDescriptions: 4 } })).toHaveLength(4);
  });

  it("applies the size limit to every format", () => {
    const big = `&(executable=/bin/true)(arguments="${"x".repeat(2000)}")`;
    expect(thrown(() => parseDescriptionsSettled(big, { maxBytes: 1000 })).code).toBe("TOO_LARGE");
    expect(parseDescriptionsSettled(big, { maxBytes: 4000 })).toHaveLength(1);
  });

  it("passes validation options through", () => {
    const [item] = parseDescriptionsSettled("&(executable=/bin/true)(rerun=10)", { maxRerun: 3 });
    expect(item?.ok && item.description.rerun).toBe(3);
  });
});

describe("parseDescriptions", () => {
  it("returns all descriptions or throws the first error", () => {
    expect(parseDescriptions("+(&(executable=/bin/a))(&(executable=/bin/b))").map((d) => d.executable)).toEqual(["/bin/a", "/bin/b"]);
    expect(thrown(() => parseDescriptions("+(&(executable=/bin/a))(&(executable=rel))")).message).toMatch(/executable 'rel'/);
  });
});
