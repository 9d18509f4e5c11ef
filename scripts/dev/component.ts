// One supervised process of `./ce start` (the JEM or the gateway): started in a process group of
// its own (so Ctrl-C reaches only the supervisor, which stops it once, gracefully), its output
// appended to its log file, ready when it writes its own ready file (CE_READY_FILE) with its pid.
import { spawn, type ChildProcess } from "node:child_process";
import { closeSync, existsSync, fstatSync, openSync, readFileSync, readSync, rmSync, writeFileSync } from "node:fs";

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export type ReadyInfo = { pid: number } & Record<string, unknown>;

export class NotReady extends Error {
  readonly code = "NOT_READY";
  constructor(
    message: string,
    readonly exit?: Exit,
  ) {
    super(message);
    this.name = "NotReady";
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export class Component {
  child?: ChildProcess;
  /** Resolves when the current process exits. */
  exited: Promise<Exit> = Promise.resolve({ code: null, signal: null });
  exit?: Exit;
  startedAt = 0;
  readyAt = 0;
  ready?: ReadyInfo;
  /** Where this process's output starts in its log (earlier runs and restarts come before). */
  private logOffset = 0;

  constructor(
    readonly name: string,
    readonly title: string,
    private readonly args: string[],
    private readonly env: NodeJS.ProcessEnv,
    readonly log: string,
    private readonly readyFile: string,
    private readonly pidFile: string,
  ) {}

  start(): void {
    rmSync(this.readyFile, { force: true });
    const fd = openSync(this.log, "a", 0o600);
    this.logOffset = fstatSync(fd).size;
    // Benchmarks only (bench/instr): CE_DEV_WRAP_<NAME> is a command put in front of node (valgrind's
    // callgrind for instruction counts), CE_DEV_NODE_ARGS_<NAME> node flags added before the others.
    const words = (v: string | undefined) => (v ?? "").split(/\s+/).filter(Boolean);
    const wrap = words(this.env[`CE_DEV_WRAP_${this.name.toUpperCase()}`]);
    const argv = [process.execPath, ...words(this.env[`CE_DEV_NODE_ARGS_${this.name.toUpperCase()}`]), ...this.args];
    const [cmd, ...args] = [...wrap, ...argv];
    const child = spawn(cmd!, args, {
      env: { ...this.env, CE_READY_FILE: this.readyFile },
      stdio: ["ignore", fd, fd],
      detached: true,
    });
    closeSync(fd);
    this.child = child;
    this.exit = undefined;
    this.ready = undefined;
    this.startedAt = Date.now();
    this.exited = new Promise((resolve) => {
      child.once("exit", (code, signal) => {
        this.exit = { code, signal };
        rmSync(this.pidFile, { force: true });
        resolve(this.exit);
      });
      // spawn itself failed (no node binary): counts as an exit.
      child.once("error", () => {
        this.exit ??= { code: 127, signal: null };
        resolve(this.exit);
      });
    });
    if (child.pid) writeFileSync(this.pidFile, `${child.pid}\n`);
  }

  get running(): boolean {
    return this.child !== undefined && this.exit === undefined;
  }

  /** Resolves with the ready file's content once this very process wrote it; rejects when it exits first or time runs out. */
  async waitReady(timeoutMs: number, cancelled: () => boolean): Promise<ReadyInfo> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (this.exit) throw new NotReady(`it exited (${describeExit(this.exit)})`, this.exit);
      if (cancelled()) throw new NotReady("start-up cancelled");
      if (existsSync(this.readyFile)) {
        try {
          const info = JSON.parse(readFileSync(this.readyFile, "utf8")) as ReadyInfo;
          if (info.pid === this.child?.pid) {
            this.ready = info;
            this.readyAt = Date.now();
            return info;
          }
        } catch {
          // Written by rename, so a partial file is not expected; read again on the next round.
        }
      }
      if (Date.now() > deadline) throw new NotReady(`it did not report ready within ${Math.round(timeoutMs / 1000)} s`);
      await sleep(100);
    }
  }

  /** SIGTERM, then SIGKILL when it has not exited within `graceMs`. */
  async stop(graceMs = 20_000): Promise<void> {
    if (!this.running) return;
    this.child!.kill("SIGTERM");
    const done = await Promise.race([this.exited.then(() => true), sleep(graceMs).then(() => false)]);
    if (!done) {
      this.child!.kill("SIGKILL");
      await this.exited;
    }
  }

  /** The last `n` lines this process wrote to its log (not those of earlier runs). */
  logLines(n: number): string[] {
    let fd: number | undefined;
    try {
      fd = openSync(this.log, "r");
      const size = fstatSync(fd).size;
      // Only the tail matters: at most 64 KiB of it.
      const from = Math.max(this.logOffset, size - 65_536);
      const buf = Buffer.alloc(size - from);
      readSync(fd, buf, 0, buf.length, from);
      return buf
        .toString("utf8")
        .split("\n")
        .filter((l) => l.trim() !== "")
        .slice(-n);
    } catch {
      return [];
    } finally {
      if (fd !== undefined) closeSync(fd);
    }
  }
}

/**
 * The line that says why a component failed: the last `…: cannot start: …` line or error-level
 * record when there is one, else the last line. Log records are written asynchronously while the
 * start-up failure goes straight to stderr, so the failure is not always the last line.
 */
export function reasonLine(lines: string[]): string | undefined {
  for (let i = lines.length - 1; i >= 0; i--) {
    const l = lines[i]!;
    if (/^[\w-]+: cannot start: /.test(l)) return l;
    if (l.startsWith("{")) {
      try {
        if (((JSON.parse(l) as { level?: number }).level ?? 0) >= 50) return l;
      } catch {
        // not JSON: not an error record
      }
    }
  }
  return lines.at(-1);
}

export function describeExit(e: Exit): string {
  return e.signal ? `signal ${e.signal}` : `exit code ${e.code}`;
}

const LEVELS: Record<number, string> = { 10: "TRACE", 20: "DEBUG", 30: "INFO", 40: "WARN", 50: "ERROR", 60: "FATAL" };

/** A log line for a terminal: pino JSON as `LEVEL message: error`, anything else as it is. */
export function readable(line: string, max = 300): string {
  let text = line;
  if (line.startsWith("{")) {
    try {
      const o = JSON.parse(line) as { level?: number; msg?: string; err?: unknown; reason?: unknown };
      const err = o.err as { message?: string } | string | undefined;
      const why = typeof err === "string" ? err : (err?.message ?? (typeof o.reason === "string" ? o.reason : undefined));
      text = `${LEVELS[o.level ?? 30] ?? o.level} ${o.msg ?? ""}${why ? `: ${why}` : ""}`;
    } catch {
      // not JSON after all: shown as written
    }
  }
  return text.length > max ? `${text.slice(0, max - 3)}...` : text;
}
