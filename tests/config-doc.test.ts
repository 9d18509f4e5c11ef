import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { configSchema, schemaKeys } from "@ce/config";
import { DOC, renderReference, withReference } from "../scripts/config-doc.js";

// docs/configuration.md is the configuration reference; its generated part must be what the
// schema says now (a key added or changed in the schema without `pnpm config:doc` fails here).
describe("docs/configuration.md", () => {
  const doc = readFileSync(DOC, "utf8");

  it("matches the reference generated from the schema (run `pnpm config:doc` after changing the schema)", () => {
    expect(doc).toBe(withReference(doc, renderReference()));
  });

  it("lists every key of the schema, with its environment variable where it has one", () => {
    for (const k of schemaKeys(configSchema)) {
      const key = k.path
        .map((s) => (s === "[]" ? "[]" : `.${s}`))
        .join("")
        .slice(1);
      if (k.path.length === 1 && k.section) {
        expect(doc, key).toContain(`### \`${key}\``);
        continue;
      }
      expect(doc, key).toContain(`| \`${key}\` |`);
      if (k.env) expect(doc, key).toContain(`| \`${k.env}\` |`);
    }
  });
});
