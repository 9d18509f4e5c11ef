import { execa } from "execa";

export interface ScriptResult {
  exitCode: number | undefined;
  signal: string | undefined;
  stdout: string;
  stderr: string;
  timedOut: boolean;
  durationMs: number;
  /** Spawn failure (ENOENT, EACCES...). */
  spawnError: string | undefined;
}

/**
 * Runs one back-end script: argv array (no shell), stdin from `input`, hard timeout. The script
 * gets its own process group and the whole group is killed on timeout (TERM, KILL 2 s later), so
 * a hung `squeue` child cannot keep the pipes, and the call, open.
 */
export async function runScript(
  file: string,
  args: string[],
  opts: {
    input?: string;
    timeoutMs: number;
    env?: Record<string, string>;
    cwd?: string;
    extendEnv?: boolean;
    /** Each complete stdout line as it arrives (the result still has all of stdout). */
    onLine?: (line: string) => void;
  },
): Promise<ScriptResult> {
  const started = performance.now();
  const child = execa(file, args, {
    input: opts.input ?? "",
    env: opts.env,
    extendEnv: opts.extendEnv ?? true,
    cwd: opts.cwd,
    reject: false,
    detached: true,
    stripFinalNewline: false,
    maxBuffer: 16 * 1024 * 1024,
    encoding: "utf8",
  });
  const onLine = opts.onLine;
  if (onLine) {
    let partial = "";
    child.stdout?.on("data", (chunk: Buffer | string) => {
      const text = partial + chunk.toString();
      const lines = text.split("\n");
      partial = lines.pop()!;
      for (const l of lines) onLine(l);
    });
  }
  let timedOut = false;
  let killTimer: NodeJS.Timeout | undefined;
  const killGroup = (sig: NodeJS.Signals) => {
    if (child.pid === undefined) return;
    try {
      process.kill(-child.pid, sig);
    } catch {
      // group already gone
    }
  };
  const timer = setTimeout(() => {
    timedOut = true;
    killGroup("SIGTERM");
    killTimer = setTimeout(() => killGroup("SIGKILL"), 2_000);
    killTimer.unref();
  }, opts.timeoutMs);
  try {
    const r = await child;
    const spawnError = r.failed && r.exitCode === undefined && r.signal === undefined && !timedOut ? r.shortMessage : undefined;
    return {
      exitCode: r.exitCode,
      signal: r.signal,
      stdout: typeof r.stdout === "string" ? r.stdout : "",
      stderr: typeof r.stderr === "string" ? r.stderr : "",
      timedOut,
      durationMs: Math.round(performance.now() - started),
      spawnError,
    };
  } finally {
    clearTimeout(timer);
    if (killTimer && !timedOut) clearTimeout(killTimer);
  }
}
