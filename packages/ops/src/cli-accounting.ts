import { Failure } from "@ce/model";
import { readFileSync } from "node:fs";
import { AccountingDb, defaultAuthnUrl, publishApel, type PublishOptions, type UsageRecord } from "@ce/accounting";
import type { CompiledConfig } from "@ce/config";

/**
 * `ceadm accounting …`: reads the accounting database directly (no Redis needed), and publishes
 * to APEL. The JEM writes the records; this only reads them and the publishing state.
 */
export const ACCOUNTING_USAGE = `
  accounting [totals] [--from D] [--to D]                 jobs, wall and CPU hours by VO, user and month
  accounting job <id>                                     the usage record(s) of one job
  accounting apel [--dry-run --out DIR]                   publish what was not sent yet (or write it to DIR)
  accounting republish --from D --to D [--dry-run --out DIR]  resend the records that ended in [D, D] (UTC)
`;

export class AccountingUsageError extends Failure<"ACCOUNTING_USAGE"> {
  constructor(message: string) {
    super("ACCOUNTING_USAGE", message);
  }
}

export interface AccountingArgs {
  sub: string | undefined;
  arg: string | undefined;
  from?: string | undefined;
  to?: string | undefined;
  dryRun: boolean;
  out?: string | undefined;
}

/** `YYYY-MM-DD` (UTC) → epoch seconds at its start, or at its end (`to`, inclusive). */
export function utcDay(text: string | undefined, end: boolean, name: string): number {
  const m = text ? /^(\d{4})-(\d{2})-(\d{2})$/.exec(text) : null;
  const ms = m ? Date.UTC(+m[1]!, +m[2]! - 1, +m[3]!) : Number.NaN;
  if (!m || Number.isNaN(ms) || new Date(ms).toISOString().slice(0, 10) !== text)
    throw new AccountingUsageError(`--${name} must be a date YYYY-MM-DD (UTC), got ${text ?? "nothing"}`);
  return ms / 1000 + (end ? 86_399 : 0);
}

const hours = (s: number) => (s / 3600).toFixed(2);

export function publishOptions(config: CompiledConfig, extra: Pick<PublishOptions, "outDir" | "range">): PublishOptions {
  const a = config.accounting.apel;
  const certFile = a.certFile ?? config.gateway.tls.certFile;
  const keyFile = a.keyFile ?? config.gateway.tls.keyFile;
  const endpoint = new URL(config.endpoint.url);
  const token = a.token ?? (a.tokenFile ? readFileSync(a.tokenFile, "utf8").trim() : undefined);
  return {
    apel: a,
    site: { site: a.site, submitHost: a.submitHost ?? config.endpoint.url, machineName: endpoint.hostname },
    signer: certFile && keyFile ? { certFile, keyFile } : undefined,
    argo: a.targetUrl
      ? {
          targetUrl: a.targetUrl,
          project: a.project,
          topic: a.topic,
          token,
          // No configured key: ARGO's authentication service gives one for the host certificate.
          authn: !token && certFile && keyFile ? { url: a.authnUrl ?? defaultAuthnUrl(a.targetUrl), certFile, keyFile } : undefined,
          ca: a.caFile ? { file: a.caFile } : { dir: config.auth.caDir },
        }
      : undefined,
    ...extra,
  };
}

export async function accountingCommand(
  config: CompiledConfig,
  args: AccountingArgs,
  json: boolean,
  out: (s: string) => void,
  table: (h: string[], rows: (string | number | undefined)[][]) => string,
): Promise<number> {
  const db = await AccountingDb.open(config.accounting.database, config.paths.stateDir);
  const print = (j: unknown, human: () => string) => out(json ? JSON.stringify(j, null, 2) : human());
  try {
    switch (args.sub ?? "totals") {
      case "totals": {
        const range = {
          ...(args.from ? { from: utcDay(args.from, false, "from") } : {}),
          ...(args.to ? { to: utcDay(args.to, true, "to") } : {}),
        };
        const res = { vo: await db.totals("vo", range), user: await db.totals("user", range), month: await db.totals("month", range) };
        print(res, () =>
          (["vo", "user", "month"] as const)
            .map((by) =>
              table(
                [by.toUpperCase(), "JOBS", "WALL_H", "CPU_H"],
                res[by].map((t) => [t.key, t.jobs, hours(t.wallSeconds), hours(t.cpuSeconds)]),
              ),
            )
            .join("\n\n"),
        );
        return 0;
      }
      case "job": {
        if (!args.arg) throw new AccountingUsageError("accounting job: a job id is required");
        const recs = await db.job(args.arg);
        if (recs.length === 0) {
          out(`no usage record for job ${args.arg}`);
          return 1;
        }
        print(recs, () =>
          recs
            .map((r) =>
              table(
                ["FIELD", "VALUE"],
                Object.entries(r).map(([k, v]) => [k, show(k, v)]),
              ),
            )
            .join("\n\n"),
        );
        return 0;
      }
      case "apel":
      case "republish": {
        if (args.dryRun !== (args.out !== undefined)) throw new AccountingUsageError("--dry-run and --out DIR go together");
        const range = args.sub === "republish" ? { from: utcDay(args.from, false, "from"), to: utcDay(args.to, true, "to") } : undefined;
        if (range && range.from > range.to) throw new AccountingUsageError("--from is after --to");
        const res = await publishApel(db, publishOptions(config, { outDir: args.out, range }));
        print(res, () =>
          args.out
            ? `${res.messages} message(s), ${res.records} job record(s) written to ${args.out}`
            : `${res.messages} message(s) sent, ${res.records} job record(s)`,
        );
        return 0;
      }
      default:
        throw new AccountingUsageError(`unknown accounting command: ${args.sub}`);
    }
  } finally {
    await db.close();
  }
}

function show(k: string, v: unknown): string {
  if (v === null || v === undefined) return "-";
  if (Array.isArray(v)) return v.join(", ");
  if (/^(submitTime|startTime|endTime)$/.test(k) && typeof v === "number") return new Date(v * 1000).toISOString().replace(/\.\d+Z$/, "Z");
  return String(v as UsageRecord[keyof UsageRecord]);
}
