/**
 * Where the back-end scripts run from when mapping is on. submit/cancel run as the job's account,
 * which must be able to reach them: a scripts dir every account can reach is used in place. One
 * under a private directory (mode 0700 somewhere above it, e.g. a checkout in /root) is not, so it
 * is copied to a fresh root-owned directory that nobody else can write: `ce-backends-<pid>-XXXXXX`
 * in the temporary directory (mkdtemp: a name nobody can pre-create). The copy is removed when the
 * JEM exits; one left by a JEM that died (its pid no longer running) is removed at the next start.
 */
import { chmodSync, lstatSync, mkdtempSync, readdirSync, rmSync, statSync, cpSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";

const PREFIX = "ce-backends-";
const COPY_NAME = /^ce-backends-(\d+)-[A-Za-z0-9]{6}$/;
const copies = new Set<string>();
let exitHook = false;

/** Whether every account can reach `dir`: o+x on each ancestor, o+r (and o+x on dirs) in the tree. */
export function reachableByAll(dir: string): boolean {
  try {
    for (let d = dirname(dir); ; d = dirname(d)) {
      if ((statSync(d).mode & 0o001) === 0) return false;
      if (d === dirname(d)) break;
    }
    const walk = (p: string): boolean => {
      const st = lstatSync(p);
      if (st.isDirectory()) return (st.mode & 0o005) === 0o005 && readdirSync(p).every((n) => walk(join(p, n)));
      return st.isSymbolicLink() || (st.mode & 0o004) !== 0;
    };
    return walk(dir);
  } catch {
    return false;
  }
}

/** The scripts dir to run from: `scriptsDir` itself when every account can reach it, else a private copy. */
export function runnableScriptsDir(scriptsDir: string): string {
  sweepStaleCopies();
  if (reachableByAll(scriptsDir)) return scriptsDir;
  const copy = mkdtempSync(join(tmpdir(), `${PREFIX}${process.pid}-`));
  copies.add(copy);
  if (!exitHook) {
    exitHook = true;
    process.once("exit", disposeScriptsCopies);
  }
  cpSync(scriptsDir, copy, { recursive: true });
  // Nothing in the copy is writable by anyone but its owner (the modes came from scriptsDir).
  const tighten = (p: string) => {
    const st = lstatSync(p);
    if (st.isSymbolicLink()) return;
    chmodSync(p, st.isDirectory() ? 0o755 : (st.mode & 0o755) | 0o444);
    if (st.isDirectory()) for (const n of readdirSync(p)) tighten(join(p, n));
  };
  tighten(copy);
  return copy;
}

/** Removes the copies this process made (at exit; tests call it directly). */
export function disposeScriptsCopies(): void {
  for (const c of copies) rmSync(c, { recursive: true, force: true });
  copies.clear();
}

/**
 * Removes `ce-backends-<pid>-*` copies whose JEM is gone: only real directories (never a link)
 * owned by this uid and not writable by group or others, whose pid is no longer running.
 * Returns what was removed.
 */
export function sweepStaleCopies(dir = tmpdir()): string[] {
  const uid = process.geteuid?.() ?? -1;
  const removed: string[] = [];
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return removed;
  }
  for (const name of names) {
    const m = COPY_NAME.exec(name);
    if (!m) continue;
    const pid = Number(m[1]);
    if (pid === process.pid || running(pid)) continue;
    const path = join(dir, name);
    try {
      const st = lstatSync(path);
      if (!st.isDirectory() || st.uid !== uid || (st.mode & 0o022) !== 0) continue;
      rmSync(path, { recursive: true, force: true });
      removed.push(path);
    } catch {
      // Gone meanwhile, or not ours to remove.
    }
  }
  return removed;
}

function running(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
}
