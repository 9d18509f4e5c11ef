import { chmod, mkdir, mkdtemp, readlink, rm, symlink, writeFile } from "node:fs/promises";
import { existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Dir } from "@ce/sessionfs";
import { linkLocalInput } from "./local.js";

// A software area that holds links of its own: those that stay inside a listed area are followed,
// one that leads to a root-only file (or anywhere else) fails the input and links nothing.
let base: string;
let sw: string;
let session: Dir;
let n = 0;

beforeAll(async () => {
  base = await mkdtemp(join(tmpdir(), "jem-local-"));
  sw = join(base, "sw");
  await mkdir(join(sw, "repo", "v1"), { recursive: true });
  await writeFile(join(sw, "repo", "v1", "file.txt"), "shared\n");
  await symlink("v1", join(sw, "repo", "latest"));
  // Root's secrets: a 0600 file in a 0700 directory, outside the area.
  await mkdir(join(base, "private"), { mode: 0o700 });
  await writeFile(join(base, "private", "key"), "root only\n", { mode: 0o600 });
  await chmod(join(base, "private"), 0o700);
  await symlink(join(base, "private", "key"), join(sw, "repo", "key"));
  await symlink(join(base, "private"), join(sw, "repo", "dir"));
  await symlink("../../private/key", join(sw, "repo", "relative"));
  // A sibling whose name starts like the area: not inside it.
  await mkdir(join(base, "sw2"));
  await writeFile(join(base, "sw2", "other.txt"), "x\n");
  await symlink(join(base, "sw2", "other.txt"), join(sw, "repo", "sibling"));
  await symlink("/etc/shadow", join(sw, "repo", "shadow"));
  await mkdir(join(base, "session"));
  session = await Dir.open(join(base, "session"));
});
afterAll(async () => {
  await session?.close();
  await rm(base, { recursive: true, force: true });
});

const link = (path: string, prefixes = [sw]) => {
  const name = `in${n++}`;
  return { name, run: linkLocalInput(`file://${path}`, { dir: session, name, at: name }, prefixes) };
};

describe("local inputs from a software area", () => {
  it("a link inside the area is followed; the session link names the checked file", async () => {
    const { name, run } = link(join(sw, "repo", "latest", "file.txt"));
    expect(await run).toBe(7);
    expect(await readlink(join(base, "session", name))).toBe(join(sw, "repo", "v1", "file.txt"));
  });

  it("an area that is itself a link: inputs resolved into it count as inside", async () => {
    await symlink(sw, join(base, "swlink"));
    const { run } = link(join(base, "swlink", "repo", "latest", "file.txt"), [join(base, "swlink")]);
    expect(await run).toBe(7);
  });

  it("a link to a root-only file, or anywhere outside the area, fails with the reason and links nothing", async () => {
    for (const p of ["key", "dir/key", "relative", "sibling", "shadow"]) {
      const { name, run } = link(join(sw, "repo", p));
      await expect(run, p).rejects.toThrow(/or a symbolic link leads outside them/);
      expect(existsSync(join(base, "session", name)), p).toBe(false);
    }
  });

  it("no existence oracle through an outside link: a missing root-only target gets the same answer", async () => {
    await symlink(join(base, "private", "nothing"), join(sw, "repo", "probe"));
    const why = async (p: string) => (await link(join(sw, "repo", p)).run.catch((e: Error) => e.message)) as string;
    const [missing, present] = [await why("probe"), await why("key")];
    expect(missing.replace("probe", "X")).toBe(present.replace("key", "X"));
    expect(await why("v1/none.txt")).toMatch(/no such file in the software areas/);
  });
});
