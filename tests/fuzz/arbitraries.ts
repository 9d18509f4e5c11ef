/**
 * Shared fast-check arbitraries for the gateway's non-description inputs: raw text, byte soup and
 * a mutation operator over grammar-built documents (so the fuzzer reaches past the first token).
 */
import { fc } from "@ce/testing/fuzz";

/** Text as an attacker sends it: any code unit, any byte decoded as UTF-8 or Latin-1. */
export const rawText: fc.Arbitrary<string> = fc.oneof(
  fc.string({ unit: "binary", maxLength: 200 }),
  fc.string({ unit: "grapheme-ascii", maxLength: 200 }),
  fc.uint8Array({ maxLength: 300 }).map((b) => Buffer.from(b).toString("utf8")),
  fc.uint8Array({ maxLength: 300 }).map((b) => Buffer.from(b).toString("latin1")),
);

const edit = fc.record({
  at: fc.nat(),
  drop: fc.nat({ max: 8 }),
  insert: fc.oneof(
    fc.constant(""),
    fc.string({ unit: "binary", maxLength: 6 }),
    fc.constantFrom("<", ">", '"', "{", "}", "[", "]", ",", ":", "&", "\\", "\0", "-----", "\n"),
  ),
});

/** Small edits (delete a few characters, insert a few) at random places of a well-formed text. */
export function mutated(base: fc.Arbitrary<string>, maxEdits = 4): fc.Arbitrary<string> {
  return fc.tuple(base, fc.array(edit, { maxLength: maxEdits })).map(([s, edits]) => {
    let out = s;
    for (const e of edits) {
      const at = out.length === 0 ? 0 : e.at % (out.length + 1);
      out = out.slice(0, at) + e.insert + out.slice(at + e.drop);
    }
    return out;
  });
}

/** Either the well-formed text, a mutation of it, or a truncation of it. */
export function wellFormedOrBroken(base: fc.Arbitrary<string>): fc.Arbitrary<string> {
  return fc.oneof(
    { arbitrary: base, weight: 2 },
    { arbitrary: mutated(base), weight: 3 },
    { arbitrary: fc.tuple(base, fc.nat()).map(([s, n]) => s.slice(0, s.length === 0 ? 0 : n % s.length)), weight: 1 },
  );
}

/** Id list cap the id-list targets run with. */
export const MAX_IDS = 50;

const id = fc.oneof(
  fc.uuid(),
  fc.stringMatching(/^[\x21-\x7e]{1,130}$/),
  fc.string({ unit: "binary", maxLength: 20 }),
  fc.constantFrom("", " ", "..", "&amp;", "&#0;", "&#x1F600;", "<![CDATA[x]]>", "\u0000", "123", "1e400"),
);
const tag = fc.constantFrom("jobs", "job", "id", "a:job", "x:id", "__proto__", "constructor", "?xml", "!--", "list");

/** A `<job>` item, mostly well-formed, sometimes with extra children, attributes or nesting. */
const xmlJob = fc.oneof(
  id.map((i) => `<job><id>${i}</id></job>`),
  fc.tuple(id, id).map(([a, b]) => `<job><id>${a}</id><id>${b}</id></job>`),
  fc.tuple(tag, id).map(([t, i]) => `<job ${t.replace(/[^a-z]/g, "") || "a"}="1"><${t}>${i}</${t}></job>`),
  fc.tuple(fc.nat({ max: 12 }), id).map(([d, i]) => `<job>${"<id>".repeat(d)}${i}${"</id>".repeat(d)}</job>`),
);
const xmlList = fc
  .tuple(
    fc.constantFrom("", '<?xml version="1.0" encoding="UTF-8"?>', "<!-- c -->", "\uFEFF"),
    tag,
    fc.array(xmlJob, { maxLength: MAX_IDS + 5 }),
  )
  .map(([pre, root, jobs]) => `${pre}<${root}>${jobs.join("")}</${root}>`);
const xmlBomb = fc.oneof(
  fc.integer({ min: 1, max: 5000 }).map((n) => "<a>".repeat(n) + "</a>".repeat(n)),
  fc
    .integer({ min: 1, max: 50 })
    .map(
      (n) =>
        `<!DOCTYPE l [<!ENTITY a "${"x".repeat(n)}">${Array.from({ length: 8 }, (_, i) => `<!ENTITY a${i + 1} "${"&a;".repeat(n)}">`).join("")}]><jobs><job><id>&a8;</id></job></jobs>`,
    ),
  fc.integer({ min: MAX_IDS, max: 3000 }).map((n) => `<jobs>${"<job><id>x</id></job>".repeat(n)}</jobs>`),
);
const jsonId = fc.oneof(id, fc.integer(), fc.double(), fc.constant(null), fc.jsonValue({ maxDepth: 2 }));
const jsonList = fc.oneof(
  fc
    .array(
      jsonId.map((i) => ({ id: i })),
      { maxLength: MAX_IDS + 5 },
    )
    .map((job) => JSON.stringify({ job })),
  jsonId.map((i) => JSON.stringify({ job: { id: i } })),
  fc.jsonValue({ maxDepth: 4 }).map((v) => JSON.stringify({ job: v })),
  fc.jsonValue({ maxDepth: 4 }).map((v) => JSON.stringify(v)),
);
const jsonBomb = fc.oneof(
  fc.integer({ min: 1, max: 100_000 }).map((n) => `{"job":${"[".repeat(n)}${"]".repeat(n)}}`),
  fc.integer({ min: MAX_IDS, max: 20_000 }).map((n) => `{"job":[${Array(n).fill('{"id":"x"}').join(",")}]}`),
);

/** Job-id list bodies: grammar-built XML and JSON (well-formed, mutated, truncated), bombs, raw text. */
export const idListBody = fc.oneof(
  { arbitrary: wellFormedOrBroken(xmlList), weight: 4 },
  { arbitrary: wellFormedOrBroken(jsonList), weight: 4 },
  { arbitrary: xmlBomb, weight: 1 },
  { arbitrary: jsonBomb, weight: 1 },
  { arbitrary: rawText, weight: 2 },
);

let calls = 0;
/**
 * Lets the event loop run every 256 cases: a long run of synchronous checks otherwise starves
 * vitest's worker RPC ("Timeout calling onTaskUpdate") and fails `pnpm fuzz` with no finding.
 */
export async function breathe(): Promise<void> {
  if (++calls % 256 === 0) await new Promise<void>((r) => setImmediate(r));
}
