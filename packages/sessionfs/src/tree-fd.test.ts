import { mkdirSync, renameSync, symlinkSync, writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { spyOnClose, type CloseSpy } from "./closespy.js";
import { removePath, SessionFsError, walkFiles } from "./index.js";

/**
 * A descriptor closed twice closes whatever another thread opened in between (the kernel hands
 * out the lowest free number). The spy opens a bystander right after every close, as the JEM's
 * file thread may, and fails the test if any later close hits a bystander's number.
 */
let base: string;
let session: string;
let spy: CloseSpy | undefined;

beforeEach(async () => {
  base = await mkdtemp(join(tmpdir(), "sessionfs-fd-"));
  session = join(base, "session");
  mkdirSync(session);
});
afterEach(async () => {
  spy?.restore();
  spy = undefined;
  await rm(base, { recursive: true, force: true });
});

function tree(root: string, depth: number): void {
  let d = root;
  for (let i = 0; i < depth; i++) {
    mkdirSync(d, { recursive: true });
    writeFileSync(join(d, "f"), "x");
    d = join(d, `d${i}`);
  }
  mkdirSync(d, { recursive: true });
}

describe("tree operations close each descriptor once", () => {
  it("removing a directory never closes a descriptor opened by someone else after its own close", async () => {
    tree(join(session, "a"), 3);
    mkdirSync(join(session, "empty"));
    spy = spyOnClose({ bystanders: true });
    await removePath(session, ["a"]);
    await removePath(session, ["empty"]);
    await removePath(join(base, "session"), []);
    expect(spy.stolen).toEqual([]);
    expect(spy.ebadf).toEqual([]);
  });

  it("a removal that fails after closing its directory does not close it again", async () => {
    tree(join(session, "a"), 1);
    spy = spyOnClose({ bystanders: true });
    const a = join(session, "a");
    let swapped = false;
    // The job swaps the top directory for a symlink just as we let go of it: rmdir then fails.
    spy.afterClose = () => {
      if (swapped) return;
      swapped = true;
      renameSync(a, join(session, "moved"));
      symlinkSync("moved", a);
    };
    const e = await removePath(session, ["a"]).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(e).toBeInstanceOf(SessionFsError);
    expect(spy.stolen).toEqual([]);
    expect(spy.ebadf).toEqual([]);
  });

  it("a walk closes each directory once", async () => {
    tree(join(session, "a"), 4);
    spy = spyOnClose({ bystanders: true });
    const r = await walkFiles(session, ["a"]);
    expect(r.files).toHaveLength(4);
    expect(spy.stolen).toEqual([]);
    expect(spy.ebadf).toEqual([]);
  });
});
