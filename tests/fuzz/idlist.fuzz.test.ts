/**
 * Job-id lists of bulk requests (E5): XML and JSON built from the grammar, mutated, truncated,
 * nested and entity bombs, raw bytes. Property: a list of ids in the id syntax and within the cap,
 * or the designed refusal (400/413/415 with a reason) — never another exception.
 */
import { describe, expect, it } from "vitest";
import { CeError } from "../../apps/gateway/src/errors.js";
import { isListedId, parseIdList } from "../../apps/gateway/src/services/idlist.js";
import { fc, fuzz } from "@ce/testing/fuzz";
import { breathe, idListBody, MAX_IDS } from "./arbitraries.js";

const contentType = fc.constantFrom(
  undefined,
  "application/json",
  "application/xml",
  "text/xml",
  "text/plain",
  "application/octet-stream",
  "application/x+json",
  "image/png",
  "*/*",
);

describe("fuzz: job-id lists", () => {
  it("ids in the id syntax within the cap, or the designed 400/413/415", async () => {
    await fuzz("idlist", fc.tuple(idListBody, contentType), async ([text, ct]) => {
      await breathe();
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
