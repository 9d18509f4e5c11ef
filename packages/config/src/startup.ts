import { renameSync, writeFileSync } from "node:fs";
import { ConfigError } from "./load.js";

/**
 * Start-up failures as the one line an operator reads (no stack trace): what went wrong, the file,
 * address or value involved, and the configuration key that set it when one did.
 */
export function startupErrorLine(e: unknown, config?: object): string {
  if (e instanceof ConfigError) return e.message;
  const err = e as NodeJS.ErrnoException & { address?: string; port?: number };
  if (err?.code === "EADDRINUSE" || (err?.code === "EACCES" && err.syscall === "listen")) {
    const key = config && err.port !== undefined ? keyOf(config, (k, v) => v === err.port && /port$/i.test(k)) : undefined;
    const what = err.code === "EADDRINUSE" ? "is already in use by another program" : "may not be bound by this account";
    return `${err.address ?? "*"}:${err.port} ${what}${key ? ` (${key})` : ""}`;
  }
  if (err?.code && err.path) {
    const key = config ? keyOf(config, (_, v) => v === err.path) : undefined;
    const reason = REASONS[err.code] ?? err.code;
    return `cannot ${err.syscall ?? "use"} ${err.path}: ${reason}${key ? ` (${key})` : ""}`;
  }
  const text = err instanceof Error ? err.message : String(e);
  return (
    text
      .split("\n")
      .map((l) => l.trim())
      .filter(Boolean)
      .join("; ") + (err?.code ? ` (${err.code})` : "")
  );
}

const REASONS: Record<string, string> = {
  ENOENT: "no such file or directory",
  EACCES: "permission denied",
  EISDIR: "is a directory",
  ENOTDIR: "a path component is not a directory",
  ELOOP: "too many symbolic links",
};

/** The dotted key of the first value `hit` accepts (the key that configured a file or port). */
function keyOf(config: object, hit: (key: string, value: unknown) => boolean): string | undefined {
  const walk = (v: unknown, path: string[]): string | undefined => {
    if (v && typeof v === "object") {
      for (const [k, c] of Object.entries(v)) {
        const found = walk(c, [...path, k]);
        if (found) return found;
      }
      return undefined;
    }
    return path.length > 0 && hit(path.at(-1)!, v) ? path.join(".") : undefined;
  };
  return walk(config, []);
}

/**
 * Reports a process that failed to start: one line on stderr, exit status 1. `who` names the
 * component (`gateway`, `jem`) so the line stands on its own in a shared terminal or log.
 */
export function failStartup(who: string, e: unknown, config?: object): never {
  process.stderr.write(`${who}: cannot start: ${startupErrorLine(e, config)}\n`);
  process.exit(1);
}

/**
 * The process's own readiness signal for a supervisor (`./ce start`): when `CE_READY_FILE` is set,
 * writes `{pid, ...info}` there (atomically) once everything listens. Absent: nothing to do.
 */
export function announceReady(info: Record<string, unknown>, env: NodeJS.ProcessEnv = process.env): void {
  const file = env.CE_READY_FILE;
  if (!file) return;
  writeFileSync(`${file}.tmp`, JSON.stringify({ pid: process.pid, ...info }));
  renameSync(`${file}.tmp`, file);
}
