import { execFileSync, spawnSync } from "node:child_process";
import { chmodSync, chownSync, cpSync, existsSync, lstatSync, mkdirSync, readdirSync, rmSync, symlinkSync } from "node:fs";
import { join, resolve } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { createBackend } from "./index.js";
import { disposeScriptsCopies, sweepStaleCopies } from "./scripts-copy.js";
import { makeConfig, SHIPPED, silentLog, tempRoot } from "./testdata/harness.js";

// Copies of the back-end scripts (mapping on) are made only when needed and never left behind.
// TMPDIR points at a directory of this test's own, so other suites' copies are not counted.

const asRoot = process.geteuid?.() === 0;
let root: string;
let tmp: string;
const savedTmp = process.env.TMPDIR;
const copiesIn = (d: string) => readdirSync(d).filter((n) => n.startsWith("ce-backends-"));
const mapping = { rules: [{ match: "*", user: "nobody" }] };

beforeAll(() => {
  root = tempRoot("ce-scopy-");
  tmp = join(root, "tmp");
  mkdirSync(tmp);
  process.env.TMPDIR = tmp;
});
afterEach(() => disposeScriptsCopies());
afterAll(() => {
  if (savedTmp === undefined) delete process.env.TMPDIR;
  else process.env.TMPDIR = savedTmp;
  rmSync(root, { recursive: true, force: true });
});

/** A pid that is certainly not running any more. */
function deadPid(): number {
  const r = spawnSync("sh", ["-c", "echo $$"], { encoding: "utf8" });
  return Number(r.stdout.trim());
}

describe("back-end scripts with mapping on", () => {
  it("a scripts dir every account can reach is used in place: no copy", () => {
    const open = join(root, "open");
    cpSync(SHIPPED, open, { recursive: true });
    chmodSync(root, 0o755);
    createBackend(makeConfig(root, { backend: "fork", scriptsDir: open }, { mapping } as never), silentLog);
    expect(copiesIn(tmp)).toEqual([]);
  });

  it("a private scripts dir is copied (root-owned, nothing writable by others) and the copy goes away", () => {
    const priv = join(root, "private");
    mkdirSync(priv, { mode: 0o700 });
    chmodSync(priv, 0o700);
    cpSync(SHIPPED, join(priv, "backends"), { recursive: true });
    createBackend(makeConfig(root, { backend: "fork", scriptsDir: join(priv, "backends") }, { mapping } as never), silentLog);
    const [copy] = copiesIn(tmp);
    expect(copy).toMatch(new RegExp(`^ce-backends-${process.pid}-[A-Za-z0-9]{6}$`));
    const st = lstatSync(join(tmp, copy!));
    expect([st.uid, st.mode & 0o7777]).toEqual([process.geteuid!(), 0o755]);
    const writable = execFileSync("find", [join(tmp, copy!), "-perm", "/022"], { encoding: "utf8" });
    expect(writable).toBe("");
    disposeScriptsCopies();
    expect(copiesIn(tmp)).toEqual([]);
  });

  it("a JEM that exits removes its copy", () => {
    const priv = join(root, "private2");
    mkdirSync(priv, { mode: 0o700 });
    chmodSync(priv, 0o700);
    cpSync(SHIPPED, join(priv, "backends"), { recursive: true });
    const mod = resolve(import.meta.dirname, "scripts-copy.ts");
    const code = `import { runnableScriptsDir } from ${JSON.stringify(mod)}; console.log(runnableScriptsDir(${JSON.stringify(join(priv, "backends"))}));`;
    const out = execFileSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", code], {
      encoding: "utf8",
      env: { ...process.env, TMPDIR: tmp },
    }).trim();
    expect(out).toMatch(/\/ce-backends-\d+-[A-Za-z0-9]{6}$/);
    expect(existsSync(out)).toBe(false);
    expect(copiesIn(tmp)).toEqual([]);
  });

  it.runIf(asRoot)("at start, copies of JEMs that are gone are removed; others' and live ones are kept", () => {
    const dead = deadPid();
    const mk = (name: string) => {
      mkdirSync(join(tmp, name, "fork"), { recursive: true, mode: 0o755 });
      return join(tmp, name);
    };
    const stale = mk(`ce-backends-${dead}-aaaaaa`);
    const live = mk(`ce-backends-${process.ppid}-bbbbbb`);
    const foreign = mk(`ce-backends-${dead}-cccccc`);
    chownSync(foreign, 65534, 65534);
    const open = mk(`ce-backends-${dead}-dddddd`);
    chmodSync(open, 0o777);
    const victim = mk("victim");
    symlinkSync(victim, join(tmp, `ce-backends-${dead}-eeeeee`));
    const legacy = mk("ce-backends-Xy12Zw"); // no pid: not provably ours
    expect(sweepStaleCopies(tmp)).toEqual([stale]);
    for (const kept of [live, foreign, open, join(victim, "fork"), legacy]) expect(existsSync(kept)).toBe(true);
  });
});
