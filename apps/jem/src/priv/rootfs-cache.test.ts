import { mkdir, mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { removeTemps } from "./rootfs-cache.js";

let root: string | undefined;
afterEach(async () => {
  if (root) await rm(root, { recursive: true, force: true });
});

describe("removeTemps", () => {
  it("with a hash removes only that URL's temporaries, never another download's partial file", async () => {
    root = await mkdtemp(join(tmpdir(), "cache-temps-"));
    await mkdir(join(root, "tmp"));
    // A download of URL b is running (its partial file), while the holder of URL a cleans a's leftovers.
    for (const f of [".ce-part-77-running", "aaaa.111", "aaaa.222", "bbbb.333"]) await writeFile(join(root, "tmp", f), "x");
    expect(await removeTemps(root, "aaaa")).toBe(2);
    expect((await readdir(join(root, "tmp"))).sort()).toEqual([".ce-part-77-running", "bbbb.333"]);
    // One exact temporary (the holder's own, after a failed commit).
    expect(await removeTemps(root, "bbbb.333")).toBe(1);
    // The cleaner (no hash) takes everything old enough, partial files included.
    expect(await removeTemps(root, "", 60_000)).toBe(0);
    expect(await removeTemps(root, "")).toBe(1);
    expect(await readdir(join(root, "tmp"))).toEqual([]);
  });
});
