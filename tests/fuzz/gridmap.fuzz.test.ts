/**
 * Grid-mapfile parser (@ce/mapping): the file is site data, but tools generate it from VO
 * membership lists, so DNs carry anything. Properties: any DN written with the grid-mapfile
 * quoting comes back exactly, with its accounts, whatever surrounds it; arbitrary text never
 * throws and yields only entries with a non-empty DN and space-free accounts.
 */
import { describe, expect, it } from "vitest";
import { parseGridMap } from "../../packages/mapping/src/gridmap.js";
import { fc, fuzz } from "@ce/testing/fuzz";

/** Quotes a DN the way grid-mapfile writers do: `\` before `"` and `\`, non-ASCII as `\xHH` bytes or raw. */
function quote(dn: string, hexNonAscii: boolean): string {
  let out = "";
  for (const ch of dn) {
    if (ch === '"' || ch === "\\") out += `\\${ch}`;
    else if (hexNonAscii && ch.codePointAt(0)! > 0x7e)
      out += [...Buffer.from(ch, "utf8")].map((b) => `\\x${b.toString(16).padStart(2, "0")}`).join("");
    else out += ch;
  }
  return `"${out}"`;
}

// DNs: printable text incl. quotes, backslashes, `#`, commas, spaces and non-ASCII; no line breaks.
const dnChar = fc.oneof(
  fc.constantFrom('"', "\\", "#", ",", " ", "\t", "=", "/", "x", "é", "ü", "€", "😀"),
  fc.string({ minLength: 1, maxLength: 1, unit: "grapheme" }),
);
const dn = fc.array(dnChar, { minLength: 1, maxLength: 60 }).map((a) => a.join("").replace(/[\r\n]/g, "_"));
const account = fc.stringMatching(/^[a-z_][a-z0-9_.-]{0,12}$/);

describe("fuzz: grid-mapfile", () => {
  it("a quoted DN and its accounts come back exactly, among comments and other lines", async () => {
    await fuzz(
      "gridmap-roundtrip",
      fc.record({
        dn,
        accounts: fc.array(account, { minLength: 1, maxLength: 4 }),
        hex: fc.boolean(),
        comment: fc.boolean(),
        sep: fc.constantFrom(" ", "\t", "  "),
      }),
      ({ dn, accounts, hex, comment, sep }) => {
        const line = `${quote(dn, hex)}${sep}${accounts.join(",")}${comment ? "  # note" : ""}`;
        const m = parseGridMap(`# header\n\n"/CN=other" other\n${line}\n`);
        expect(m.warnings).toEqual([]);
        // The first line for a DN wins: a DN equal to the earlier one keeps that one's account.
        expect(m.entries.get(dn)?.accounts).toEqual(dn === "/CN=other" ? ["other"] : accounts);
      },
    );
  });

  it("arbitrary text never throws; every entry has a DN and space-free accounts", async () => {
    await fuzz(
      "gridmap-arbitrary",
      fc.string({ maxLength: 400, unit: fc.constantFrom('"', "\\", "x", "4", "1", " ", "\n", "#", ",", "a", "/", "\t", "\r") }),
      (text) => {
        const m = parseGridMap(text);
        for (const [k, e] of m.entries) {
          expect(k).toBe(e.dn);
          expect(e.dn.length).toBeGreaterThan(0);
          expect(e.accounts.length).toBeGreaterThan(0);
          for (const a of e.accounts) expect(a).toMatch(/^\S+$/);
        }
      },
    );
  });
});
