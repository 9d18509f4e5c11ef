import { lstat, mkdir, mkdtemp, readdir, readFile, readlink, rm, stat, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { replaceFileIn, SessionFsError } from "./index.js";

// replaceFileIn is how root writes a credential into a job's session (apps/jem credential-files.ts):
// whatever the job left at the name, the new content arrives by rename, owned as asked, and
// nothing outside the session is written through a link.

let base: string;
let session: string;
let secret: string;
beforeEach(async () => {
  base = await mkdtemp(join(tmpdir(), "sessionfs-replace-"));
  session = join(base, "session");
  secret = join(base, "secret.key");
  await mkdir(session);
  await writeFile(secret, "HOST PRIVATE KEY");
});
afterEach(async () => rm(base, { recursive: true, force: true }));

const ROOT = process.getuid?.() === 0;

describe("replaceFileIn", () => {
  it("creates the file with its mode, then replaces it by rename (a reader's open file keeps the old content)", async () => {
    await replaceFileIn(session, ".bearer_token", "first", { mode: 0o600 });
    const file = join(session, ".bearer_token");
    expect(await readFile(file, "utf8")).toBe("first");
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    const before = (await stat(file)).ino;
    const reader = await import("node:fs/promises").then((f) => f.open(file, "r"));
    await replaceFileIn(session, ".bearer_token", "second", { mode: 0o600 });
    expect(await readFile(file, "utf8")).toBe("second");
    expect((await stat(file)).ino).not.toBe(before); // a new file, renamed over the old one
    expect((await reader.readFile()).toString()).toBe("first");
    await reader.close();
    expect(await readdir(session)).toEqual([".bearer_token"]); // no temporary file left
  });

  it("replaces a symlink the job planted at the name instead of writing through it", async () => {
    await symlink(secret, join(session, "user.proxy"));
    await replaceFileIn(session, "user.proxy", "PROXY", { mode: 0o600 });
    expect(await readFile(secret, "utf8")).toBe("HOST PRIVATE KEY");
    expect((await lstat(join(session, "user.proxy"))).isFile()).toBe(true);
    expect(await readFile(join(session, "user.proxy"), "utf8")).toBe("PROXY");
  });

  it("refuses a session dir that is a symlink, a directory at the name, and names that are no plain name", async () => {
    const elsewhere = join(base, "elsewhere");
    await mkdir(elsewhere);
    await symlink(elsewhere, join(base, "linked"));
    expect((await replaceFileIn(join(base, "linked"), "t", "x", { mode: 0o600 }).catch((e: unknown) => e)) as SessionFsError).toMatchObject(
      {
        kind: "not-dir",
      },
    );
    expect(await readdir(elsewhere)).toEqual([]);
    await mkdir(join(session, "d"));
    await writeFile(join(session, "d", "keep"), "k");
    const e = (await replaceFileIn(session, "d", "x", { mode: 0o600 }).catch((err: unknown) => err)) as SessionFsError;
    expect(e).toBeInstanceOf(SessionFsError);
    expect(await readFile(join(session, "d", "keep"), "utf8")).toBe("k");
    expect((await readdir(session)).sort()).toEqual(["d"]);
    for (const bad of ["", ".", "..", "a/b", "a\0b"]) {
      expect(await replaceFileIn(session, bad, "x", { mode: 0o600 }).catch((err: unknown) => err)).toMatchObject({ kind: "invalid" });
    }
    expect(await readlink(join(base, "linked"))).toBe(elsewhere);
  });

  it.skipIf(!ROOT)("gives the file the owner asked for (root writing for the job's account)", async () => {
    await replaceFileIn(session, "t", "x", { mode: 0o600, owner: { uid: 4321, gid: 4322 } });
    const st = await stat(join(session, "t"));
    expect([st.uid, st.gid, st.mode & 0o7777]).toEqual([4321, 4322, 0o600]);
  });
});
