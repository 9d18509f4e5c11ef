import { describe, expect, it } from "vitest";
import { CeError } from "../errors.js";
import fc from "fast-check";
import { MAX_XML_DEPTH, isListedId, parseIdList, quickJsonIdList } from "./idlist.js";

/** The designed refusal: a CeError with status and code, and a reason naming the problem. */
function refusal(f: () => unknown): { status: number; code: string; message: string } {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(CeError);
    const c = e as CeError;
    return { status: c.status, code: c.code, message: c.message };
  }
  throw new Error("expected a refusal");
}

const xml = (ids: string[]) => `<jobs>${ids.map((i) => `<job><id>${i}</id></job>`).join("")}</jobs>`;

describe("parseIdList", () => {
  it("reads XML and JSON lists in order", () => {
    expect(parseIdList(xml(["a", "b"]), undefined)).toEqual(["a", "b"]);
    expect(parseIdList('{"job":[{"id":"a"},{"id":7}]}', "application/json")).toEqual(["a", "7"]);
    expect(parseIdList('<?xml version="1.0"?><?pi x?><!-- c --><jobs><job><id>x</id></job></jobs>', "application/xml")).toEqual(["x"]);
  });

  // Findings of tests/fuzz/idlist.fuzz.test.ts: each was a plain Error (500) or an unbounded list.
  it("an XML nesting bomb is refused before parsing (413 naming the tag count)", () => {
    const r = refusal(() => parseIdList("<a>".repeat(300_000) + "</a>".repeat(300_000), undefined));
    expect(r).toMatchObject({ status: 413, code: "TOO_MANY_IDS" });
    expect(r.message).toMatch(/600000 tags/);
  });
  it("nesting deeper than an id list needs is a 400, not the parser's plain Error", () => {
    const d = MAX_XML_DEPTH + 2;
    const r = refusal(() => parseIdList("<a>".repeat(d) + "</a>".repeat(d), undefined, 100));
    expect(r).toMatchObject({ status: 400, code: "BAD_ID_LIST" });
    expect(r.message).toMatch(/nested deeper than 8/);
  });
  it("elements other than <job> are ignored, whatever their name (__proto__ included)", () => {
    expect(
      parseIdList("<jobs><__proto__><id>x</id></__proto__><job><note>n</note><id a='1'>y</id><id>z</id></job></jobs>", undefined),
    ).toEqual(["y"]);
    expect(({} as Record<string, unknown>).id).toBeUndefined();
  });
  it("1 MiB of entities, attributes or comments costs milliseconds, not seconds", () => {
    const M = 1024 * 1024;
    const bodies = [
      `<jobs><job><id>${"&#65;".repeat(M / 5)}</id></job></jobs>`,
      `<jobs ${Array.from({ length: 60_000 }, (_, i) => `a${i}="1"`).join(" ")}/>`,
      `<jobs>${"<!-- x -->".repeat(20_000)}</jobs>`,
      `<jobs a="${"'".repeat(M)}`,
    ];
    for (const b of bodies) {
      const t0 = performance.now();
      try {
        parseIdList(b, undefined);
      } catch (e) {
        expect((e as CeError).status).toBe(400);
      }
      expect(performance.now() - t0).toBeLessThan(300);
    }
    expect(refusal(() => parseIdList(bodies[0]!, undefined)).message).toMatch(/<id> is longer than 128 characters/);
  });
  it("names the problem of malformed XML with its position", () => {
    expect(refusal(() => parseIdList("<jobs><job><id>a&b;</id></job></jobs>", undefined)).message).toMatch(
      /undefined entity.*line 1, column 16/,
    );
    expect(refusal(() => parseIdList("<jobs>\n<job><id>x</id></jobs>", undefined)).message).toMatch(
      /expected <\/job>, found <\/jobs> \(line 2/,
    );
    expect(refusal(() => parseIdList("<jobs>hello</jobs>", undefined)).message).toMatch(/text outside an <id>/);
    expect(refusal(() => parseIdList("<jobs><job><id>x", undefined)).message).toMatch(/unclosed <id>/);
  });
  it("one million ids is a 413 naming the count and the cap", () => {
    const r = refusal(() => parseIdList(`{"job":[${Array(1_000_000).fill('{"id":1}').join(",")}]}`, "application/json", 10_000));
    expect(r.status).toBe(413);
    expect(r.message).toMatch(/1000000 job ids.*limit is 10000/);
    expect(refusal(() => parseIdList(xml(Array(101).fill("x")), undefined, 100))).toMatchObject({ status: 413, code: "TOO_MANY_IDS" });
    expect(parseIdList(xml(Array(100).fill("x")), undefined, 100)).toHaveLength(100);
  });
  it("ids outside the id syntax are a 400 naming the item (controls, spaces, surrogates, 129 chars)", () => {
    for (const bad of ["a\\u0000b", "a b", "\\ud800", "é", "x".repeat(129)]) {
      const r = refusal(() => parseIdList(`{"job":[{"id":"ok"},{"id":"${bad}"}]}`, "application/json"));
      expect(r).toMatchObject({ status: 400, code: "BAD_JOB_ID" });
      expect(r.message).toMatch(/^job\[1\] id /);
    }
    expect(isListedId("x".repeat(128))).toBe(true);
    expect([isListedId(""), isListedId("x".repeat(129)), isListedId("a\x7f"), isListedId("!~")]).toEqual([false, false, false, true]);
  });
  it("two XML roots, entities and DTDs are refused", () => {
    expect(refusal(() => parseIdList("<jobs/><jobs/>", undefined)).message).toMatch(/more than one root element/);
    expect(refusal(() => parseIdList('<!DOCTYPE x [<!ENTITY a "b">]><jobs/>', undefined)).message).toMatch(/DOCTYPE/);
    expect(refusal(() => parseIdList("<jobs><job><id>&#0;</id></job></jobs>", undefined)).status).toBe(400);
  });
  it("an inherited key is not a list (JSON)", () => {
    expect(refusal(() => parseIdList('{"job":[{"__proto__":{"id":"x"}}]}', "application/json")).message).toMatch(/job\[0\] has no "id"/);
    expect(refusal(() => parseIdList('{"constructor":1}', "application/json")).message).toMatch(/key "job"/);
  });
});

describe("quickJsonIdList (the JSON list without JSON.parse)", () => {
  /** The general way: JSON.parse, and the checks it is followed by. */
  const general = (text: string, max: number): string[] => {
    const doc = JSON.parse(text) as { job: { id: string }[] };
    const ids = doc.job.map((j) => j.id);
    expect(ids.length).toBeLessThanOrEqual(max);
    expect(ids.every((id) => typeof id === "string" && isListedId(id))).toBe(true);
    return ids;
  };
  const ws = fc.oneof(
    { arbitrary: fc.constantFrom("", " ", "\n", "\t", "\r\n  "), weight: 20 },
    { arbitrary: fc.constantFrom("\u00a0", "\ufeff", "\v"), weight: 1 },
  );
  const idChars = fc.constantFrom(...'abcXYZ09-_.:~!#{}[]"\\/é \u0000\u007f😀');
  const id = fc.oneof(
    { arbitrary: fc.uuid(), weight: 8 },
    fc.string({ unit: idChars, minLength: 0, maxLength: 6 }),
    fc.constantFrom("x".repeat(128), "x".repeat(129), "7"),
  );

  it("takes the canonical shape of valid ids, with any JSON whitespace", () => {
    const ids = ["a", "2f0b1d3e-7c4a-4e59-9d7b-1b2c3d4e5f60", "x".repeat(128), "!#$%&'()*+-./:;<=>?@[]^_`{|}~"];
    expect(quickJsonIdList(JSON.stringify({ job: ids.map((i) => ({ id: i })) }), 100)).toEqual(ids);
    expect(quickJsonIdList(JSON.stringify({ job: ids.map((i) => ({ id: i })) }, null, 2), 100)).toEqual(ids);
    expect(quickJsonIdList(' \r\n{ "job" :[ {"id": "a"} ,{ "id":"b" } ] }\n', 2)).toEqual(["a", "b"]);
  });

  it("leaves everything else to JSON.parse: escapes, numbers, other keys, one object, empty, too many", () => {
    for (const t of [
      '{"job":[{"id":"a\\"b"}]}',
      '{"job":[{"id":"\\u0061"}]}',
      '{"job":[{"id":7}]}',
      '{"job":[{"id":"a","x":1}]}',
      '{"job":{"id":"a"}}',
      '{"job":[]}',
      '{"job":[{"id":"a"}],"job":[{"id":"b"}]}',
      '{"job":[{"id":"a"},]}',
      '{"job":[{"id":"a"}]}x',
      '\u00a0{"job":[{"id":"a"}]}',
    ]) {
      expect(quickJsonIdList(t, 100)).toBeUndefined();
    }
    expect(quickJsonIdList('{"job":[{"id":"a"},{"id":"b"}]}', 1)).toBeUndefined();
    expect(refusal(() => parseIdList('{"job":[{"id":"a"},{"id":"b"}]}', "application/json", 1))).toMatchObject({
      status: 413,
      code: "TOO_MANY_IDS",
    });
  });

  it("whatever it takes, JSON.parse reads the same ids and the general checks accept them", () => {
    let taken = 0;
    fc.assert(
      fc.property(
        fc.array(fc.tuple(id, ws, ws, ws), { minLength: 0, maxLength: 5 }),
        ws,
        ws,
        fc.integer({ min: 1, max: 10 }),
        (items, a, b, max) => {
          // Built by hand (not JSON.stringify): raw quotes, backslashes and controls reach the scanner.
          const text = `${a}{"job":[${items.map(([i, x, y, z]) => `${x}{${y}"id":"${i}"}${z}`).join(",")}]}${b}`;
          const quick = quickJsonIdList(text, max);
          if (quick !== undefined) {
            taken++;
            expect(general(text, max)).toEqual(quick);
            expect(parseIdList(text, "application/json", max)).toEqual(quick);
          }
        },
      ),
      { numRuns: 3_000 },
    );
    expect(taken).toBeGreaterThan(300);
  });
});
