import { linkSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { emptyDescription, type OutputFile } from "@ce/model";
import { MAX_LIST_BYTES, MAX_LIST_LINES, outputPlan, purgeSession } from "./outputs.js";
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
const plan = (outputs: OutputFile[], maxLines = 100_000) =>
  outputPlan(session, { ...emptyDescription("nordugrid:xrsl"), outputFiles: outputs }, "success", 0, maxLines);

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

describe("the lists of one job together", () => {
  it("past staging.maxOutputListLines the list that crosses it is refused with the cap, later ones unread", async () => {
    for (const n of ["a", "b", "c"])
      writeFileSync(join(session, `${n}.list`), Array.from({ length: 400 }, (_, i) => `${n}${i}\n`).join(""));
    const p = await plan([out("@a.list"), out("@b.list"), out("@c.list")], 700);
    expect(p.keep.filter((k) => !k.endsWith(".list"))).toHaveLength(400); // a's names only
    expect(p.refused).toEqual([
      "output list /b.list: 800 lines with the lists before it, more than the 700 one job's output lists may have together (staging.maxOutputListLines)",
      "output list /c.list: not read, the job's output lists are over their limit already",
    ]);
    expect((await plan([out("@a.list"), out("@b.list")], 800)).refused).toEqual([]);
  });
});

describe("purgeSession", () => {
  it("keeps exactly the listed names and the parents they need, whatever sorts between them", async () => {
    for (const d of ["a", "a/b", "a/bc", "a-b", "keepdir", "keepdir/x", "gone"]) mkdirSync(join(session, d));
    for (const f of ["a/b/kept", "a/b/other", "a/bc/f", "a-b/f", "a.c", "keepdir/x/f", "gone/f", "top"])
      writeFileSync(join(session, f), "");
    symlinkSync(outside, join(session, "linkparent"));
    const removed = await purgeSession(session, { keep: ["a/b/kept", "top", "linkparent/x"], keepDirs: ["keepdir"] });
    expect(readdirSync(session).sort()).toEqual(["a", "keepdir", "linkparent", "top"]);
    expect(readdirSync(join(session, "a"))).toEqual(["b"]);
    expect(readdirSync(join(session, "a/b"))).toEqual(["kept"]);
    expect(readdirSync(join(session, "keepdir/x"))).toEqual(["f"]);
    expect(removed).toBe(5); // a/b/other, a/bc, a-b, a.c, gone
  });
});
