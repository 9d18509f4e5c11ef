/**
 * A private xrootd (Debian's xrootd-server) for staging tests. xrootd has no listen-address
 * setting, so it runs with a tiny LD_PRELOAD shim (bind-loopback.c, compiled here with cc) that
 * turns its wildcard bind into 127.0.0.1: nothing listens beyond loopback. It runs as the
 * `xrootd` account (it refuses root), anonymous (no GSI here), with adler32 checksums on.
 */
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { chmod, chown, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { freePort } from "../../../../tests/support/redis-server.js";

export interface Xrootd {
  /** `root://localhost:<port>` */
  url: string;
  dataDir: string;
  close(): Promise<void>;
}

export function haveXrootd(): boolean {
  const hasUser = (() => {
    try {
      execFileSync("id", ["xrootd"], { stdio: "ignore" });
      return true;
    } catch {
      return false;
    }
  })();
  return process.getuid?.() === 0 && hasUser && existsSync("/usr/bin/xrootd") && existsSync("/usr/bin/xrdcp") && existsSync("/usr/bin/cc");
}

export async function startXrootd(): Promise<Xrootd> {
  const root = await mkdtemp(join(tmpdir(), "jem-xrootd-"));
  await chmod(root, 0o755);
  const dataDir = join(root, "data");
  const admin = join(root, "admin");
  await mkdir(dataDir);
  await mkdir(admin);
  const uid = Number(execFileSync("id", ["-u", "xrootd"]).toString().trim());
  const gid = Number(execFileSync("id", ["-g", "xrootd"]).toString().trim());
  await chown(dataDir, uid, gid);
  await chown(admin, uid, gid);
  const shim = join(root, "bind-loopback.so");
  execFileSync("cc", ["-shared", "-fPIC", "-o", shim, fileURLToPath(new URL("./bind-loopback.c", import.meta.url)), "-ldl"]);
  const port = await freePort();
  await writeFile(join(root, "xrootd.cfg"), [
    `xrd.port ${port}`, "all.export /", `oss.localroot ${dataDir}`, "xrootd.chksum adler32", `all.adminpath ${admin}`, `all.pidpath ${admin}`, "",
  ].join("\n"));
  const child: ChildProcess = spawn("/usr/bin/xrootd", ["-c", join(root, "xrootd.cfg"), "-R", "xrootd"], {
    env: { ...process.env, LD_PRELOAD: shim }, stdio: "ignore",
  });
  const url = `root://localhost:${port}`;
  for (let i = 0; ; i++) {
    try {
      execFileSync("xrdfs", [`localhost:${port}`, "ls", "/"], { stdio: "ignore", timeout: 3_000 });
      break;
    } catch {
      if (i > 20 || child.exitCode !== null) {
        child.kill("SIGTERM");
        throw new Error(`xrootd did not start (exit ${child.exitCode})`);
      }
      await new Promise((r) => setTimeout(r, 250));
    }
  }
  return {
    url,
    dataDir,
    async close() {
      if (child.exitCode === null) {
        child.kill("SIGTERM");
        await new Promise((r) => child.once("exit", r));
      }
      await rm(root, { recursive: true, force: true });
    },
  };
}
