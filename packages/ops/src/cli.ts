import { Failure } from "@ce/model";
import { parseArgs } from "node:util";
import type { Queue } from "bullmq";
import { ConfigError, loadConfig } from "@ce/config";
import { connectRedis, describeRedis, RteError } from "@ce/store";
import { cacheStats, listCache, requestCacheClean } from "./cache.js";
import { AdminOps, OpsError, openQueues, QUEUE_COUNT_STATES } from "./ops.js";
import { ACCOUNTING_USAGE, AccountingUsageError, accountingCommand } from "./cli-accounting.js";
import { iso, size, table } from "./cli/format.js";
import { colourWanted } from "./cli/colour.js";
import { chooseConfigFile } from "./cli/config-file.js";
import * as jobs from "./cli/jobs.js";
import { pendingList } from "./cli/pending.js";
import { ExplainUsageError, explain, renderExplanation } from "./cli/explain.js";
import { summaryCommand } from "./cli/summary.js";
import { RTE_USAGE, rteCommand, RteUsageError } from "./rte-cli.js";

/**
 * `ceadm`: the operator's command line. Reads the same configuration as the services (`--config`,
 * CE_CONFIG, or the nearest `.ce/ce.yaml` up from the working directory: cli/config-file.ts; plus
 * CE__* overrides) and talks to Redis directly, so it works with every gateway and JEM down.
 * Tables are for people: sizes in KiB/MiB, colour on a terminal only (NO_COLOR respected);
 * `--json` keeps every exact value.
 */

const USAGE = `usage: ceadm [--json] [--config FILE] <command>
  (configuration: --config, else CE_CONFIG, else the nearest .ce/ce.yaml up from here)

  jobs list [--owner DN] [--state S[,S...]] [--limit N]   jobs, newest first (AGE = time in state)
  jobs list --pending [--owner DN] [--limit N]            jobs waiting in the batch system, with its reason
  jobs show [--all] <id>                                  one job: state and failure first
  jobs stuck [--older-than 30m|6h|2d] [--state S,...]     jobs past an age in their internal state
  jobs log [--log FILE] <id>                              state history and the JEM's log lines of a job
  jobs kill <id>                                          queue a kill (as REST would)
  jobs clean <id>                                         queue a clean
  explain [--dn DN] [--fqan FQAN]... [--token FILE] [--queue Q] FILE
                                                          what the CE would do with this job (exit 0 accept, 1 refuse)
  summary [--by vo,owner,state] [--active] [--limit N]    jobs per VO / owner / state and REST state
  drain on|off|status                                     refuse / accept new jobs
  queues                                                  BullMQ job counts per queue and the work list
  stats                                                   jobs per REST state
  cache stats                                             input cache hits, misses, bytes saved, usage per dir
  cache list [--limit N]                                  cached files (reads the cache dirs: run as root)
  cache clean                                             ask the JEMs for a cleaner pass now
  doctor                                                  check the configuration and this host; every problem with its fix (exit 1 if any)${ACCOUNTING_USAGE}
${RTE_USAGE}`;

class UsageError extends Failure<"USAGE"> {
  constructor(message: string) {
    super("USAGE", message);
  }
}

export { table } from "./cli/format.js";
export { showField } from "./cli/jobs.js";

export async function main(
  argv: string[],
  out: (s: string) => void = (s) => process.stdout.write(`${s}\n`),
  note: (s: string) => void = (s) => process.stderr.write(`${s}\n`),
): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      json: { type: "boolean", default: false },
      config: { type: "string" },
      owner: { type: "string" },
      state: { type: "string" },
      limit: { type: "string" },
      from: { type: "string" },
      to: { type: "string" },
      out: { type: "string" },
      "dry-run": { type: "boolean", default: false },
      all: { type: "boolean", default: false },
      "older-than": { type: "string" },
      log: { type: "string" },
      by: { type: "string" },
      active: { type: "boolean", default: false },
      pending: { type: "boolean", default: false },
      dn: { type: "string" },
      fqan: { type: "string", multiple: true },
      token: { type: "string" },
      queue: { type: "string" },
      help: { type: "boolean", short: "h", default: false },
    },
  });
  const [cmd, sub, arg] = positionals;
  if (values.help || !cmd) {
    out(USAGE);
    return values.help ? 0 : 2;
  }
  const chosen = chooseConfigFile(values.config, process.env, process.cwd());
  // Said on stderr, so `--json` output stays clean: which Redis ceadm talks to follows from it.
  if (chosen.how === "found") note(`ceadm: using ${chosen.file} (found from ${process.cwd()}; CE_CONFIG or --config choose another)`);
  const config = loadConfig(chosen.file ? { file: chosen.file } : {});
  const configText = chosen.file ? `configuration ${chosen.file}` : "no configuration file: CE__* and defaults";
  const colour = !values.json && colourWanted();
  // The accounting database is read directly: no Redis needed.
  if (cmd === "accounting")
    return accountingCommand(
      config,
      { sub, arg, from: values.from, to: values.to, dryRun: values["dry-run"], out: values.out },
      values.json,
      out,
      table,
    );
  // Its own bounded Redis checks: works (and says so) with Redis down.
  // Loaded on use: its X.509 and account code would slow every other command's start.
  if (cmd === "doctor")
    return (await import("./doctor/cli.js")).doctorCommand(config, values.config ?? process.env.CE_CONFIG, values.json, out);
  // Files under the control dir only: works without Redis.
  if (cmd === "rte")
    return rteCommand(config, positionals.slice(1), (json, human) => out(values.json ? JSON.stringify(json, null, 2) : human()), table);
  // Fail fast instead of retrying forever when Redis is down.
  // ceadm logs in as the JEM's ACL user (an operator on the JEM's host can read its password file).
  const clients = connectRedis(config.redis, "ceadm");
  const redis = clients.redis;
  let lastError: Error | undefined;
  redis.on("error", (e: Error) => (lastError = e)); // reported below instead of as an unhandled event

  let queues: Queue[] = [];
  const needsQueues = cmd === "queues";
  try {
    await redis.connect().catch((e: Error) => {
      throw new Error(`cannot reach Redis (${describeRedis(config.redis)}; ${configText}): ${(lastError ?? e).message}`);
    });
    if (needsQueues) queues = openQueues(config, undefined, clients.bull);
    const ops = new AdminOps(redis, config.redis.prefix, queues);
    const print = (json: unknown, human: () => string) => out(values.json ? JSON.stringify(json, null, 2) : human());
    const c = { ops, config, json: values.json, out, values, colour };

    switch (cmd) {
      case "jobs": {
        if (sub === "list") return values.pending ? await pendingList(c) : await jobs.listJobs(c);
        if (sub === "stuck") return await jobs.stuck(c);
        if (!arg) throw new UsageError(`jobs ${sub ?? ""}: a job id is required`);
        if (sub === "show") return await jobs.show(c, arg);
        if (sub === "log") return await jobs.log(c, arg);
        if (sub === "kill" || sub === "clean") {
          const res = await ops.command(sub, arg, `ceadm-${process.pid}-${Date.now()}`);
          print(res, () => (res.queued ? `${sub} of job ${arg} queued` : `${sub} of job ${arg}: nothing to do (the job already ended)`));
          return 0;
        }
        throw new UsageError(`unknown jobs command: ${sub ?? "(none)"}`);
      }
      case "summary":
        return await summaryCommand(c);
      case "explain": {
        const e = await explain(config, redis, ops, {
          dn: values.dn,
          fqan: values.fqan,
          token: values.token,
          queue: values.queue,
          file: sub,
        });
        print(e, () => renderExplanation(e));
        return e.accepted ? 0 : 1;
      }
      case "drain": {
        if (sub !== "on" && sub !== "off" && sub !== "status") throw new UsageError("drain on|off|status");
        const st = sub === "status" ? await ops.drainStatus() : await ops.setDrain(sub === "on");
        print(st, () =>
          st.draining ? `draining since ${iso(st.since) ?? "?"}: new jobs are refused` : "not draining: new jobs are accepted",
        );
        return 0;
      }
      case "queues": {
        const counts = await ops.queueCounts();
        print(counts, () =>
          table(
            ["QUEUE", ...QUEUE_COUNT_STATES.map((s) => s.toUpperCase())],
            Object.entries(counts).map(([q, c]) => [q, ...QUEUE_COUNT_STATES.map((s) => c[s] ?? 0)]),
          ),
        );
        return 0;
      }
      case "stats": {
        const st = await ops.stats();
        print(
          st,
          () =>
            `${table(
              ["STATE", "JOBS"],
              Object.entries(st.states).map(([s, n]) => [s, n]),
            )}\n${"TOTAL".padEnd(11)}  ${st.total}`,
        );
        return 0;
      }
      case "cache": {
        if (sub === "stats") {
          const st = await cacheStats(redis, config);
          print(
            st,
            () =>
              `hits ${st.hits}  misses ${st.misses}  refused ${st.refused}  saved ${size(st.bytesSaved)}\n` +
              table(
                ["DIR", "FILES", "SIZE", "IN USE", "USED", "HIGH", "MEASURED"],
                st.dirs.map((d) => [d.dir, d.files, size(d.bytes), d.inUse, d.used, d.high, iso(d.at)]),
                { colour },
              ),
          );
          return 0;
        }
        if (sub === "list") {
          const files = await listCache(config, values.limit ? Number(values.limit) : undefined);
          print(files, () =>
            table(
              ["HASH", "SIZE", "LINKS", "LAST USE", "URL"],
              files.map((f) => [f.hash.slice(0, 16), size(f.size), f.links, iso(f.lastUse), f.url]),
              { colour },
            ),
          );
          return 0;
        }
        if (sub === "clean") {
          await requestCacheClean(redis, config);
          print({ requested: true }, () => "cache clean requested: a JEM runs the cleaner within seconds (see ceadm cache stats)");
          return 0;
        }
        throw new UsageError(`unknown cache command: ${sub ?? "(none)"}`);
      }
      default:
        throw new UsageError(`unknown command: ${cmd}`);
    }
  } finally {
    await Promise.all(queues.map((q) => q.close()));
    await clients.close();
  }
}

// Run only as a program, not when a test imports `main`/`table`.
if (process.argv[1] && import.meta.filename === process.argv[1]) {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (e: unknown) => {
      const usage =
        e instanceof UsageError ||
        e instanceof AccountingUsageError ||
        e instanceof RteUsageError ||
        e instanceof ExplainUsageError ||
        (e as { code?: string }).code?.startsWith("ERR_PARSE_ARGS");
      process.stderr.write(`ceadm: ${(e as Error).message}\n${usage ? USAGE : ""}`);
      process.exit(usage ? 2 : e instanceof OpsError || e instanceof ConfigError || e instanceof RteError ? 1 : 3);
    },
  );
}
