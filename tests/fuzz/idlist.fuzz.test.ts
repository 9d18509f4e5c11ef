/**
 * Job-id lists of bulk requests (E5): XML and JSON built from the grammar, mutated, truncated,
 * nested and entity bombs, raw bytes. Property: a list of ids in the id syntax and within the cap,
 * or the designed refusal (400/413/415 with a reason) — never another exception.
 */
import { describe, expect, it } from "vitest";
import { CeError } from "../../apps/gateway/src/errors.js";
import { isListedId, parseIdList } from "../../apps/gateway/src/services/idlist.js";
import { fc, fuzz } from "../support/fuzz.js";
import { rawText, wellFormedOrBroken } from "./arbitraries.js";

const MAX_IDS = 50;

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
  .tuple(fc.constantFrom("", '<?xml version="1.0" encoding="UTF-8"?>', "<!-- c -->", "\uFEFF"), tag, fc.array(xmlJob, { maxLength: MAX_IDS + 5 }))
  .map(([pre, root, jobs]) => `${pre}<${root}>${jobs.join("")}</${root}>`);
const xmlBomb = fc.oneof(
  fc.integer({ min: 1, max: 5000 }).map((n) => "<a>".repeat(n) + "</a>".repeat(n)),
  fc.integer({ min: 1, max: 50 }).map((n) => `<!DOCTYPE l [<!ENTITY a "${"x".repeat(n)}">${Array.from({ length: 8 }, (_, i) => `<!ENTITY a${i + 1} "${"&a;".repeat(n)}">`).join("")}]><jobs><job><id>&a8;</id></job></jobs>`),
  fc.integer({ min: MAX_IDS, max: 3000 }).map((n) => `<jobs>${"<job><id>x</id></job>".repeat(n)}</jobs>`),
);
const jsonId = fc.oneof(id, fc.integer(), fc.double(), fc.constant(null), fc.jsonValue({ maxDepth: 2 }));
const jsonList = fc.oneof(
  fc.array(jsonId.map((i) => ({ id: i })), { maxLength: MAX_IDS + 5 }).map((job) => JSON.stringify({ job })),
  jsonId.map((i) => JSON.stringify({ job: { id: i } })),
  fc.jsonValue({ maxDepth: 4 }).map((v) => JSON.stringify({ job: v })),
  fc.jsonValue({ maxDepth: 4 }).map((v) => JSON.stringify(v)),
);
const jsonBomb = fc.oneof(
  fc.integer({ min: 1, max: 100_000 }).map((n) => `{"job":${"[".repeat(n)}${"]".repeat(n)}}`),
  fc.integer({ min: MAX_IDS, max: 20_000 }).map((n) => `{"job":[${Array(n).fill('{"id":"x"}').join(",")}]}`),
);

const body = fc.oneof(
  { arbitrary: wellFormedOrBroken(xmlList), weight: 4 },
  { arbitrary: wellFormedOrBroken(jsonList), weight: 4 },
  { arbitrary: xmlBomb, weight: 1 },
  { arbitrary: jsonBomb, weight: 1 },
  { arbitrary: rawText, weight: 2 },
);
const contentType = fc.constantFrom(undefined, "application/json", "application/xml", "text/xml", "text/plain", "application/octet-stream", "application/x+json", "image/png", "*/*");

describe("fuzz: job-id lists", () => {
  it("ids in the id syntax within the cap, or the designed 400/413/415", async () => {
    await fuzz("idlist", fc.tuple(body, contentType), ([text, ct]) => {
      let ids: string[];
      try {
        ids = parseIdList(text, ct, MAX_IDS);
      } catch (e) {
        if (!(e instanceof CeError) || ![400, 413, 415].includes(e.status) || e.message.length < 10) throw e;
        return;
      }
      expect(ids.length).toBeLessThanOrEqual(MAX_IDS);
      for (const i of ids) expect(isListedId(i), JSON.stringify(i)).toBe(true);
    });
  });
});
