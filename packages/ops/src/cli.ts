import { parseArgs } from "node:util";
import type { Queue } from "bullmq";
import { ConfigError, loadConfig } from "@ce/config";
import { connectRedis, describeRedis, RteError } from "@ce/store";
import type { LocalUser } from "@ce/model";
import { AdminOps, OpsError, openQueues, QUEUE_COUNT_STATES } from "./ops.js";
import { RTE_USAGE, rteCommand, RteUsageError } from "./rte-cli.js";

/**
 * `ceadm`: the operator's command line. Reads the same configuration as the services (CE_CONFIG
 * plus CE__* overrides) and talks to Redis directly, so it works with every gateway and JEM down.
 */

const USAGE = `usage: ceadm [--json] [--config FILE] <command>

  jobs list [--owner DN] [--state S[,S...]] [--limit N]   jobs, newest first
  jobs show <id>                                          one job record
  jobs kill <id>                                          queue a kill (as REST would)
  jobs clean <id>                                         queue a clean
  drain on|off|status                                     refuse / accept new jobs
  queues                                                  BullMQ job counts per queue
  stats                                                   jobs per REST state
${RTE_USAGE}`;

class UsageError extends Error {}

/** Plain aligned columns; good enough for a terminal and for `grep`/`awk`. */
export function table(headers: string[], rows: (string | number | undefined)[][]): string {
  const cells = [headers, ...rows.map((r) => r.map((v) => (v === undefined ? "-" : String(v))))];
  const widths = headers.map((_, i) => Math.max(...cells.map((r) => r[i]?.length ?? 0)));
  return cells.map((r) => r.map((v, i) => (i === r.length - 1 ? v : v.padEnd(widths[i]!))).join("  ")).join("\n");
}

const iso = (ms: number | undefined) => (ms ? new Date(ms).toISOString().replace(/\.\d+Z$/, "Z") : undefined);

export async function main(argv: string[], out: (s: string) => void = (s) => process.stdout.write(`${s}\n`)): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      json: { type: "boolean", default: false },
      config: { type: "string" },
      owner: { type: "string" },
      state: { type: "string" },
      limit: { type: "string" },
      help: { type: "boolean", short: "h", default: false },
    },
  });
  const [cmd, sub, arg] = positionals;
  if (values.help || !cmd) {
    out(USAGE);
    return values.help ? 0 : 2;
  }
  const config = loadConfig(values.config ? { file: values.config } : {});
  // Files under the control dir only: works without Redis.
  if (cmd === "rte") return rteCommand(config, positionals.slice(1), (json, human) => out(values.json ? JSON.stringify(json, null, 2) : human()), table);
  // Fail fast instead of retrying forever when Redis is down.
  // ceadm logs in as the JEM's ACL user (an operator on the JEM's host can read its password file).
  const clients = connectRedis(config.redis, "ceadm");
  const redis = clients.redis;
  let lastError: Error | undefined;
  redis.on("error", (e: Error) => (lastError = e)); // reported below instead of as an unhandled event

  let queues: Queue[] = [];
  const needsQueues = cmd === "queues" || (cmd === "jobs" && (sub === "kill" || sub === "clean"));
  try {
    await redis.connect().catch((e: Error) => {
      throw new Error(`cannot reach Redis (${describeRedis(config.redis)}): ${(lastError ?? e).message}`);
    });
    if (needsQueues) queues = openQueues(config, undefined, clients.bull);
    const ops = new AdminOps(redis, config.redis.prefix, queues);
    const print = (json: unknown, human: () => string) => out(values.json ? JSON.stringify(json, null, 2) : human());

    switch (cmd) {
      case "jobs": {
        if (sub === "list") {
          const limit = values.limit ? Number(values.limit) : undefined;
          const res = await ops.listJobs({ owner: values.owner, states: ops.parseStates(values.state), limit });
          print(res, () =>
            `${table(["ID", "STATE", "INTERNAL", "QUEUE", "CREATED", "OWNER"], res.jobs.map((j) => [j.id, j.rest, j.state, j.queue, iso(j.created), j.owner]))}\n` +
            `${res.jobs.length} of ${res.total} job(s)`,
          );
          return 0;
        }
        if (!arg) throw new UsageError(`jobs ${sub ?? ""}: a job id is required`);
        if (sub === "show") {
          const r = await ops.getJob(arg);
          print(r, () => table(["FIELD", "VALUE"], Object.entries(r).map(([k, v]) => [k, showField(k, v)])));
          return 0;
        }
        if (sub === "kill" || sub === "clean") {
          const res = await ops.command(sub, arg, `ceadm-${process.pid}-${Date.now()}`);
          print(res, () => (res.queued ? `${sub} of job ${arg} queued` : `${sub} of job ${arg}: nothing to do (the job already ended)`));
          return 0;
        }
        throw new UsageError(`unknown jobs command: ${sub ?? "(none)"}`);
      }
      case "drain": {
        if (sub !== "on" && sub !== "off" && sub !== "status") throw new UsageError("drain on|off|status");
        const st = sub === "status" ? await ops.drainStatus() : await ops.setDrain(sub === "on");
        print(st, () => (st.draining ? `draining since ${iso(st.since) ?? "?"}: new jobs are refused` : "not draining: new jobs are accepted"));
        return 0;
      }
      case "queues": {
        const counts = await ops.queueCounts();
        print(counts, () => table(["QUEUE", ...QUEUE_COUNT_STATES.map((s) => s.toUpperCase())], Object.entries(counts).map(([q, c]) => [q, ...QUEUE_COUNT_STATES.map((s) => c[s] ?? 0)])));
        return 0;
      }
      case "stats": {
        const st = await ops.stats();
        print(st, () => `${table(["STATE", "JOBS"], Object.entries(st.states).map(([s, n]) => [s, n]))}\n${"TOTAL".padEnd(11)}  ${st.total}`);
        return 0;
      }
      default:
        throw new UsageError(`unknown command: ${cmd}`);
    }
  } finally {
    await Promise.all(queues.map((q) => q.close()));
    await clients.close();
  }
}

/** One record field for `jobs show`: times as ISO, the mapped account spelled out. */
export function showField(k: string, v: unknown): string {
  if (k === "localUser" && v && typeof v === "object") {
    const u = v as LocalUser;
    return `${u.account} (uid ${u.uid}, gid ${u.gid}, groups ${u.groups?.join(",") ?? "-"}; by ${u.rule})`;
  }
  if (k === "fqans" && Array.isArray(v)) return v.join(", ");
  if (typeof v === "object") return JSON.stringify(v);
  return /^(created|updated|stateSince|startedAt|endedAt|cleanupAt|removeAt|delegationExpires)$/.test(k) ? (iso(v as number) ?? "-") : String(v);
}

// Run only as a program, not when a test imports `main`/`table`.
if (process.argv[1] && import.meta.filename === process.argv[1]) {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (e: unknown) => {
      const usage = e instanceof UsageError || e instanceof RteUsageError || (e as { code?: string }).code?.startsWith("ERR_PARSE_ARGS");
      process.stderr.write(`ceadm: ${(e as Error).message}\n${usage ? USAGE : ""}`);
      process.exit(usage ? 2 : e instanceof OpsError || e instanceof ConfigError || e instanceof RteError ? 1 : 3);
    },
  );
}
