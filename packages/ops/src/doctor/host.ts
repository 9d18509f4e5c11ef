import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import type { CompiledConfig } from "@ce/config";
import { connectRedis, describeRedis } from "@ce/store";
import { fatal, type Problem, reportedByStart, warning } from "./problem.js";

const run = promisify(execFile);

/** Clocks further apart than this break lease expiry and the at-most-once hold (docs/at-most-once.md). */
export const MAX_CLOCK_OFFSET_MS = 2_000;

/**
 * Redis reachable with each app's ACL user and password file, and this host's clock against
 * Redis' (`TIME`): leases and holds are decided by both. Unreachable is a warning (the gateway
 * answers 503 and the JEM waits until it is back); refused credentials are fatal.
 */
export async function redisProblems(
  c: CompiledConfig,
  timeoutMs: number,
  roles: readonly ("gateway" | "jem")[] = ["gateway", "jem"],
): Promise<Problem[]> {
  const out: Problem[] = [];
  const where = describeRedis(c.redis);
  let clockDone = false;
  for (const role of roles) {
    const user = c.redis.users[role];
    // connectRedis' "ceadm" client fails fast (no retries); it logs in as `users.jem`, so the
    // gateway's user is checked by putting it in that place.
    const cfg = { ...c.redis, users: { ...c.redis.users, jem: user } };
    let clients;
    try {
      clients = connectRedis(cfg, "ceadm");
    } catch (e) {
      // The app's own start stops on an unreadable password file, naming it: left to it.
      out.push(
        reportedByStart(
          fatal(
            "redis",
            (e as Error).message.replaceAll("redis.users.jem.", `redis.users.${role}.`),
            `write the ${role}'s Redis password to ${user.passwordFile ?? "a file"} (mode 600, owner ce)`,
          ),
        ),
      );
      continue;
    }
    const redis = clients.redis;
    let last: Error | undefined;
    redis.on("error", (e: Error) => (last = e));
    try {
      const timer = new Promise<never>((_, reject) =>
        setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs).unref(),
      );
      await Promise.race([redis.connect(), timer]);
      const [sec, usec] = await Promise.race([redis.time(), timer]);
      if (!clockDone) {
        clockDone = true;
        const offset = Date.now() - (Number(sec) * 1000 + Number(usec) / 1000);
        if (Math.abs(offset) > MAX_CLOCK_OFFSET_MS)
          out.push(
            warning(
              "clock",
              `this host's clock is ${(offset / 1000).toFixed(1)} s ${offset > 0 ? "ahead of" : "behind"} Redis' (${where}); leases and submission holds assume the same time`,
              "run a time service on every CE host (systemctl enable --now chrony)",
            ),
          );
      }
    } catch (e) {
      const msg = (last ?? (e as Error)).message;
      if (/WRONGPASS|NOAUTH|NOPERM|invalid username-password/i.test(msg))
        out.push(
          fatal(
            "redis",
            `Redis (${where}) refuses the ${role}'s user ${user.username}: ${msg}`,
            `make redis.users.${role}.passwordFile hold the password of the ACL user ${user.username} (docs/operations.md "Authentication")`,
          ),
        );
      else
        out.push(
          warning(
            "redis",
            `cannot reach Redis (${where}) as ${user.username}: ${msg}`,
            "start Redis (systemctl start redis-server@ce) or correct redis.url",
          ),
        );
    } finally {
      await clients.close().catch(() => undefined);
    }
  }
  return out;
}

/** The batch system's query command answers as the CE runs it (Slurm `sinfo`, Grid Engine `qstat`). */
export async function batchProblems(c: CompiledConfig, timeoutMs: number): Promise<Problem[]> {
  const cmd =
    c.lrms.backend === "slurm"
      ? { file: join(c.lrms.slurm.binPath, "sinfo"), args: ["-h", "-o", "%P"], key: "lrms.slurm.binPath" }
      : c.lrms.backend === "sge"
        ? { file: join(c.lrms.sge.binPath, "qstat"), args: [], key: "lrms.sge.binPath" }
        : undefined;
  if (!cmd) return [];
  try {
    await run(cmd.file, cmd.args, { timeout: timeoutMs });
    return [];
  } catch (e) {
    const err = e as { code?: unknown; killed?: boolean; stderr?: string; message: string };
    const why =
      err.code === "ENOENT"
        ? "not found"
        : err.killed
          ? `no answer within ${timeoutMs} ms`
          : (err.stderr?.trim().split("\n").at(-1) ?? err.message);
    return [
      warning(
        "batch",
        `${cmd.file} ${cmd.args.join(" ")} failed: ${why}`,
        err.code === "ENOENT"
          ? `install the batch system's client commands or correct ${cmd.key}`
          : "check the batch system's controller and this host's client configuration (munge, slurm.conf; SGE_ROOT, SGE_CELL)",
      ),
    ];
  }
}
