import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** A throwaway real redis-server on a free loopback port (the project's own, not a container). */
export interface RedisHandle {
  url: string;
  port: number;
  stop(): Promise<void>;
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.unref();
    s.on("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const addr = s.address();
      const port = typeof addr === "object" && addr ? addr.port : 0;
      s.close(() => resolve(port));
    });
  });
}

export async function startRedis(): Promise<RedisHandle> {
  const dir = mkdtempSync(join(tmpdir(), "ce-redis-"));
  const port = await freePort();
  const child: ChildProcess = spawn(
    "redis-server",
    ["--port", String(port), "--bind", "127.0.0.1", "--dir", dir, "--save", "", "--appendonly", "no", "--protected-mode", "yes"],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  let log = "";
  child.stdout?.on("data", (d) => (log += String(d)));
  child.stderr?.on("data", (d) => (log += String(d)));
  const started = Date.now();
  while (!log.includes("Ready to accept connections")) {
    if (child.exitCode !== null) throw new Error(`redis-server exited: ${log}`);
    if (Date.now() - started > 10_000) throw new Error(`redis-server did not start: ${log}`);
    await new Promise((r) => setTimeout(r, 20));
  }
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    async stop() {
      if (child.exitCode === null) {
        const exited = new Promise((r) => child.once("exit", r));
        child.kill("SIGTERM");
        await exited;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
