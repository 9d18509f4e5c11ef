import { execFileSync, spawn } from "node:child_process";
import { chmodSync, chownSync, existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "./ports.js";

/**
 * A throwaway PostgreSQL server (Debian's postgresql, /usr/lib/postgresql/<v>/bin) on a free
 * loopback port, trust authentication, data in a temporary directory. PostgreSQL refuses to run as
 * root: under root it runs as the `postgres` account (runuser).
 */
export interface PostgresHandle {
  url: string;
  stop(): Promise<void>;
}

function binDir(): string {
  const base = "/usr/lib/postgresql";
  const versions = existsSync(base)
    ? execFileSync("ls", [base])
        .toString()
        .split("\n")
        .filter((v) => /^\d+$/.test(v))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  const dir = versions.map((v) => join(base, v, "bin")).find((d) => existsSync(join(d, "initdb")));
  if (!dir) throw new Error("PostgreSQL server binaries not found under /usr/lib/postgresql (install the Debian package `postgresql`)");
  return dir;
}

export async function startPostgres(): Promise<PostgresHandle> {
  const bin = binDir();
  const root = process.getuid?.() === 0;
  const dir = mkdtempSync(join(tmpdir(), "ce-pg-"));
  const data = join(dir, "data");
  chmodSync(dir, 0o755);
  const uid = root ? Number(execFileSync("id", ["-u", "postgres"]).toString()) : undefined;
  const gid = root ? Number(execFileSync("id", ["-g", "postgres"]).toString()) : undefined;
  if (root) chownSync(dir, uid!, gid!);
  const as = (cmd: string, args: string[]) =>
    (root ? ["runuser", ["-u", "postgres", "--", cmd, ...args]] : [cmd, args]) as [string, string[]];
  execFileSync(...as(join(bin, "initdb"), ["-D", data, "-U", "ce", "--auth=trust", "-E", "UTF8", "--no-sync"]), { stdio: "ignore" });
  const port = await freePort();
  const proc = spawn(...as(join(bin, "postgres"), ["-D", data, "-h", "127.0.0.1", "-p", String(port), "-k", dir, "-c", "fsync=off"]), {
    stdio: "ignore",
  });
  const url = `postgres://ce@127.0.0.1:${port}/postgres`;
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      execFileSync(join(bin, "pg_isready"), ["-h", "127.0.0.1", "-p", String(port)], { stdio: "ignore" });
      break;
    } catch {
      if (Date.now() > deadline || proc.exitCode !== null) throw new Error(`PostgreSQL did not start on 127.0.0.1:${port}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  return {
    url,
    async stop() {
      if (proc.exitCode === null) {
        const exited = new Promise((r) => proc.once("exit", r));
        // Through pg_ctl (as the server's account): a signal to runuser would not reach postgres.
        execFileSync(...as(join(bin, "pg_ctl"), ["stop", "-D", data, "-m", "immediate", "-w"]), { stdio: "ignore" });
        await exited;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
