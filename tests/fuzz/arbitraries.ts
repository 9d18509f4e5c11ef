/**
 * Shared fast-check arbitraries for the gateway's non-description inputs: raw text, byte soup and
 * a mutation operator over grammar-built documents (so the fuzzer reaches past the first token).
 */
import { fc } from "../support/fuzz.js";

/** Text as an attacker sends it: any code unit, any byte decoded as UTF-8 or Latin-1. */
export const rawText: fc.Arbitrary<string> = fc.oneof(
  fc.string({ unit: "binary", maxLength: 200 }),
  fc.string({ unit: "grapheme-ascii", maxLength: 200 }),
  fc.uint8Array({ maxLength: 300 }).map((b) => Buffer.from(b).toString("utf8")),
  fc.uint8Array({ maxLength: 300 }).map((b) => Buffer.from(b).toString("latin1")),
);

const edit = fc.record({ at: fc.nat(), drop: fc.nat({ max: 8 }), insert: fc.oneof(fc.constant(""), fc.string({ unit: "binary", maxLength: 6 }), fc.constantFrom("<", ">", "\"", "{", "}", "[", "]", ",", ":", "&", "\\", "\0", "-----", "\n")) });

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
