import { linkSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { emptyDescription, type OutputFile } from "@ce/model";
import { MAX_LIST_BYTES, MAX_LIST_LINES, outputPlan } from "./outputs.js";
import { sessionSegments } from "./paths.js";

// An `@list` output file is written by the job: whatever it says or is, the plan takes only
// session-relative names from a regular file of bounded size, and says why when it refuses one.

let session: string;
let outside: string;
beforeEach(() => {
  session = mkdtempSync(join(tmpdir(), "ce-outlist-"));
  outside = mkdtempSync(join(tmpdir(), "ce-outlist-host-"));
});
afterEach(() => {
  rmSync(session, { recursive: true, force: true });
  rmSync(outside, { recursive: true, force: true });
});

const out = (name: string, extra: Partial<OutputFile> = {}): OutputFile => ({
  name,
  options: {},
  useIfSuccess: true,
  useIfFailure: false,
  useIfCancel: false,
  ...extra,
});
const plan = (outputs: OutputFile[]) => outputPlan(session, { ...emptyDescription("nordugrid:xrsl"), outputFiles: outputs }, "success", 0);

describe("@list outputs from the job", () => {
  it("a list that is a link (symbolic or hard) to a file elsewhere is refused, its lines never read", async () => {
    writeFileSync(join(outside, "list"), "secret https://example.org/x\n");
    symlinkSync(join(outside, "list"), join(session, "sym.list"));
    linkSync(join(outside, "list"), join(session, "hard.list"));
    const p = await plan([out("@sym.list"), out("@hard.list")]);
    expect(p.uploads).toEqual([]);
    expect(p.refused).toHaveLength(2);
    expect(p.refused[0]).toMatch(/output list refused .*symbolic link/);
    expect(p.refused[1]).toMatch(/output list refused .*hard link/);
  });

  it("a list over the size or line bound is refused whole, with the bound in the reason", async () => {
    writeFileSync(join(session, "big.list"), `a https://example.org/a\n${"#".repeat(MAX_LIST_BYTES)}\n`);
    writeFileSync(join(session, "many.list"), "a\n".repeat(MAX_LIST_LINES + 1));
    writeFileSync(join(session, "ok.list"), "a\n".repeat(MAX_LIST_LINES));
    const p = await plan([out("@big.list"), out("@many.list")]);
    expect(p.uploads).toEqual([]);
    expect(p.keep).toEqual(["big.list", "many.list"]);
    expect(p.refused[0]).toMatch(/output list refused .*big\.list/);
    expect(p.refused[1]).toBe(`output list /many.list: ${MAX_LIST_LINES + 1} lines, more than the ${MAX_LIST_LINES} allowed`);
    expect((await plan([out("@ok.list")])).refused).toEqual([]);
  });

  it("absolute and .. names stay session names; malformed or foreign URL options never override the entry's", async () => {
    writeFileSync(
      join(session, "o.list"),
      [
        "/etc/passwd https://example.org/p",
        "../../etc/shadow https://example.org/s",
        "a https://example.org;failureallowed=yes;checksum=adler32:1/a",
        "b https://example.org;noequals/b",
        "c   https://example.org;unknown=1/c   trailing words",
      ].join("\n"),
    );
    const p = await plan([out("@o.list", { options: { failureallowed: "no" } })]);
    const byName = Object.fromEntries(p.uploads.map((u) => [u.name, u]));
    // Leading slashes make session-relative names, not the host's files; `..` never opens.
    expect(byName["etc/passwd"]?.target).toBe("https://example.org/p");
    expect(() => sessionSegments("../../etc/shadow")).toThrow();
    expect(byName["a"]?.options).toEqual({ failureallowed: "no", checksum: "adler32:1" });
    expect(byName["b"]?.options).toEqual({ failureallowed: "no" });
    expect(byName["c"]).toMatchObject({ target: "https://example.org;unknown=1/c", options: { unknown: "1", failureallowed: "no" } });
    expect(p.refused).toEqual([]);
  });
});
