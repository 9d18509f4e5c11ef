import { mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { GridMapFile, parseGridMap } from "./gridmap.js";
import { quietPeriod, waitFor } from "@ce/testing";

const dir = mkdtempSync(join(tmpdir(), "gridmap-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("grid-mapfile parsing", () => {
  it("reads quoted DNs with spaces, escapes, comments and several accounts", () => {
    const m = parseGridMap(
      [
        "# a comment",
        "",
        '   "/DC=org/DC=example/CN=Jane Doe" jane',
        '"/DC=org/CN=Quote \\"Q\\" Person" qp1,qp2 ,qp3',
        '"/DC=org/CN=Back\\\\slash" bs   # trailing comment',
        '"/DC=org/CN=Jos\\xC3\\xA9 M\\xC3\\xBCller" jose',
        "/DC=org/CN=NoSpaces unq",
        '"/DC=org/CN=Tab\tSeparated"\ttab',
        '"/DC=org/CN=Jane Doe" second-entry-ignored',
        "\r",
      ].join("\r\n"),
    );
    const get = (dn: string) => m.entries.get(dn)?.accounts;
    expect(get("/DC=org/DC=example/CN=Jane Doe")).toEqual(["jane"]);
    expect(get('/DC=org/CN=Quote "Q" Person')).toEqual(["qp1", "qp2", "qp3"]);
    expect(get("/DC=org/CN=Back\\slash")).toEqual(["bs"]);
    expect(get("/DC=org/CN=José Müller")).toEqual(["jose"]);
    expect(get("/DC=org/CN=NoSpaces")).toEqual(["unq"]);
    expect(get("/DC=org/CN=Tab\tSeparated")).toEqual(["tab"]);
    expect(get("/DC=org/CN=Jane Doe")).toEqual(["second-entry-ignored"]); // a different DN (no DC=example)
    expect(m.entries.get("/DC=org/DC=example/CN=Jane Doe")?.line).toBe(3);
    expect(m.warnings).toEqual([]);
  });

  it("a stray CR inside an unquoted line is text, not a crash (found by the fuzz target)", () => {
    const m = parseGridMap('/\t1\r\r4"x,\n/CN=ok ok\n');
    expect(m.entries.get("/CN=ok")?.accounts).toEqual(["ok"]);
    expect(m.warnings).toEqual(['line 1: accounts are separated by commas, not spaces ("1\r\r4"x")']);
  });

  it("the first line for a DN wins", () => {
    const m = parseGridMap('"/CN=A" first\n"/CN=A" second\n');
    expect(m.entries.get("/CN=A")?.accounts).toEqual(["first"]);
  });

  it("skips lines that do not parse, naming the line", () => {
    const m = parseGridMap(
      ['"/CN=Unterminated account', '"/CN=NoAccount"', '"/CN=Glued"acct', "/CN=X a b", '"/CN=Ok" ok', '""  empty'].join("\n"),
    );
    expect(m.warnings).toEqual([
      "line 1: unterminated quoted DN",
      "line 2: no account after the DN",
      "line 3: no space after the quoted DN",
      'line 4: accounts are separated by commas, not spaces ("a b")',
      "line 6: empty DN",
    ]);
    expect([...m.entries.keys()]).toEqual(["/CN=Ok"]);
  });
});

describe("grid-mapfile reload", () => {
  it("picks up a changed file on use (mtime check), keeps the last good map when it becomes unreadable", async () => {
    const path = join(dir, "grid-mapfile");
    writeFileSync(path, '"/CN=A" a1\n');
    const warnings: string[] = [];
    const f = new GridMapFile(path, { checkMs: 0, onWarning: (w) => warnings.push(w) });
    await f.load();
    expect((await f.lookup("/CN=A"))?.accounts).toEqual(["a1"]);
    expect(await f.lookup("/CN=B")).toBeUndefined();

    // Replaced the way tools do it (write + rename): new inode.
    writeFileSync(`${path}.new`, '"/CN=A" a2\n"/CN=B" b1\n');
    renameSync(`${path}.new`, path);
    expect((await f.lookup("/CN=A"))?.accounts).toEqual(["a2"]);
    expect((await f.lookup("/CN=B"))?.accounts).toEqual(["b1"]);
    const gen = f.generation;

    // Unchanged: no re-read.
    await f.lookup("/CN=A");
    expect(f.generation).toBe(gen);

    // Gone: the previous map stays, with a warning.
    rmSync(path);
    expect((await f.lookup("/CN=B"))?.accounts).toEqual(["b1"]);
    expect(warnings.some((w) => w.includes("not reloaded"))).toBe(true);
  });

  it("checks at most every checkMs, and concurrent callers share one reload", async () => {
    const path = join(dir, "gm2");
    writeFileSync(path, '"/CN=A" a1\n');
    let loads = 0;
    const f = new GridMapFile(path, { checkMs: 60_000, onLoad: () => void loads++ });
    await f.load();
    writeFileSync(path, '"/CN=A" changed\n');
    // Within checkMs the old answer stands (no stat per request).
    expect((await f.lookup("/CN=A"))?.accounts).toEqual(["a1"]);
    const g = new GridMapFile(path, {
      checkMs: 0,
      onLoad: async () => {
        loads++;
        await quietPeriod(20, "a slow reload, so concurrent lookups pile up on it");
      },
    });
    loads = 0;
    await g.load();
    writeFileSync(path, '"/CN=A" again\n"/CN=C" c\n');
    const all = await Promise.all(Array.from({ length: 20 }, () => g.lookup("/CN=A")));
    expect(all.every((e) => e?.accounts[0] === "again")).toBe(true);
    expect(loads).toBe(2);
  });

  it("a slow reload does not hold the request: the previous map answers until it is done", async () => {
    const path = join(dir, "gm3");
    writeFileSync(path, '"/CN=A" a1\n');
    let release: () => void = () => undefined;
    let slow = false;
    const f = new GridMapFile(path, {
      checkMs: 0,
      maxWaitMs: 50,
      onLoad: () => (slow ? new Promise<void>((r) => (release = r)) : undefined),
    });
    await f.load();
    slow = true;
    writeFileSync(path, '"/CN=A" a2-longer\n');
    const t0 = Date.now();
    expect((await f.lookup("/CN=A"))?.accounts).toEqual(["a1"]);
    expect(Date.now() - t0).toBeLessThan(1_000);
    release();
    await waitFor("the reloaded map", async () => (await f.lookup("/CN=A"))?.accounts[0] === "a2-longer", 5_000, { everyMs: 5 });
  });

  it("the first load fails loudly (boot stops) for a missing file or a directory", async () => {
    await expect(new GridMapFile(join(dir, "nope"), { checkMs: 0 }).load()).rejects.toThrow(/grid-mapfile .*nope.*ENOENT/);
    const p = join(dir, "a-directory");
    mkdirSync(p);
    await expect(new GridMapFile(p, { checkMs: 0 }).load()).rejects.toThrow(/EISDIR/);
  });
});
