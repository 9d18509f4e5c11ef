import type { UsageRecord } from "../record.js";
import { MIGRATIONS } from "./schema.js";
import { AccountingDbError, type Param, type Row, type Sql, type SqlTx } from "./sql.js";
import { openSqlite } from "./sqlite.js";
import { openPostgres } from "./postgres.js";

export { AccountingDbError } from "./sql.js";

/** `accounting.database`: a postgres URL, `sqlite:<path>`, or a bare path (SQLite). */
export function databaseLocation(
  setting: string | undefined,
  stateDir: string,
): { kind: "sqlite"; path: string } | { kind: "postgres"; url: string } {
  const s = setting ?? `${stateDir}/accounting/accounting.db`;
  if (/^postgres(ql)?:\/\//.test(s)) return { kind: "postgres", url: s };
  return { kind: "sqlite", path: s.replace(/^sqlite:/, "") };
}

const COLS = [
  "record_id",
  "job_id",
  "batch_id",
  "owner",
  "owner_dn",
  "token_issuer",
  "token_subject",
  "vo",
  "vo_group",
  "vo_role",
  "fqan",
  "fqans",
  "account",
  "uid",
  "queue",
  "partition",
  "submit_time",
  "start_time",
  "end_time",
  "end_month",
  "wall_seconds",
  "cpu_user_seconds",
  "cpu_system_seconds",
  "cpu_seconds",
  "max_rss_kb",
  "processors",
  "node_count",
  "nodes",
  "exit_code",
  "state",
  "failure_cause",
  "failure",
  "bytes_in",
  "bytes_out",
  "bytes_in_cache",
  "benchmark_type",
  "benchmark_value",
  "stream_id",
  "recorded_at",
] as const;

export const monthOf = (epochS: number) => new Date(epochS * 1000).toISOString().slice(0, 7);

function toRow(r: UsageRecord, streamId: string, now: number): Param[] {
  return [
    r.recordId,
    r.jobId,
    r.batchId,
    r.owner,
    r.ownerDn,
    r.tokenIssuer,
    r.tokenSubject,
    r.vo,
    r.voGroup,
    r.voRole,
    r.fqan,
    JSON.stringify(r.fqans),
    r.account,
    r.uid,
    r.queue,
    r.partition,
    r.submitTime,
    r.startTime,
    r.endTime,
    monthOf(r.endTime),
    r.wallSeconds,
    r.cpuUserSeconds,
    r.cpuSystemSeconds,
    r.cpuSeconds,
    r.maxRssKb,
    r.processors,
    r.nodeCount,
    r.nodes,
    r.exitCode,
    r.state,
    r.failureCause,
    r.failure,
    r.bytesIn,
    r.bytesOut,
    r.bytesInCache,
    r.benchmarkType,
    r.benchmarkValue,
    streamId,
    now,
  ];
}

const n = (v: unknown) => (v === null || v === undefined ? null : Number(v));
const s = (v: unknown) => (v === null || v === undefined ? null : String(v));

export function fromRow(x: Row): UsageRecord {
  return {
    recordId: String(x.record_id),
    jobId: String(x.job_id),
    batchId: s(x.batch_id),
    owner: String(x.owner),
    ownerDn: s(x.owner_dn),
    tokenIssuer: s(x.token_issuer),
    tokenSubject: s(x.token_subject),
    vo: String(x.vo),
    voGroup: s(x.vo_group),
    voRole: s(x.vo_role),
    fqan: s(x.fqan),
    fqans: JSON.parse(String(x.fqans)) as string[],
    account: s(x.account),
    uid: n(x.uid),
    queue: String(x.queue),
    partition: s(x.partition),
    submitTime: Number(x.submit_time),
    startTime: n(x.start_time),
    endTime: Number(x.end_time),
    wallSeconds: Number(x.wall_seconds),
    cpuUserSeconds: Number(x.cpu_user_seconds),
    cpuSystemSeconds: Number(x.cpu_system_seconds),
    cpuSeconds: Number(x.cpu_seconds),
    maxRssKb: n(x.max_rss_kb),
    processors: Number(x.processors),
    nodeCount: Number(x.node_count),
    nodes: s(x.nodes),
    exitCode: n(x.exit_code),
    state: String(x.state) as UsageRecord["state"],
    failureCause: s(x.failure_cause),
    failure: s(x.failure),
    bytesIn: Number(x.bytes_in),
    bytesOut: Number(x.bytes_out),
    bytesInCache: Number(x.bytes_in_cache),
    benchmarkType: s(x.benchmark_type),
    benchmarkValue: n(x.benchmark_value),
  };
}

export interface TotalRow {
  key: string;
  jobs: number;
  wallSeconds: number;
  cpuSeconds: number;
}

export type TotalsBy = "vo" | "user" | "month";
const TOTAL_KEY: Record<TotalsBy, string> = { vo: "vo", user: "owner", month: "end_month" };

/** The accounting database (SQLite or PostgreSQL), one API over both. */
export class AccountingDb {
  private constructor(private readonly sql: Sql) {}

  get kind() {
    return this.sql.kind;
  }

  /** Opens and migrates to the newest schema. */
  static async open(setting: string | undefined, stateDir: string): Promise<AccountingDb> {
    const loc = databaseLocation(setting, stateDir);
    let sql: Sql;
    try {
      sql = loc.kind === "postgres" ? openPostgres(loc.url) : openSqlite(loc.path);
    } catch (e) {
      throw new AccountingDbError(
        `accounting database ${loc.kind === "sqlite" ? loc.path : "(postgres)"} cannot be opened: ${(e as Error).message}`,
        { cause: e },
      );
    }
    const db = new AccountingDb(sql);
    try {
      await db.migrate();
    } catch (e) {
      await sql.close().catch(() => undefined);
      throw new AccountingDbError(`accounting database migration failed: ${(e as Error).message}`, { cause: e });
    }
    return db;
  }

  /** Applies the migrations not yet applied; returns the schema version. */
  async migrate(): Promise<number> {
    return this.sql.tx(
      async (t) => {
        await t.run(
          "CREATE TABLE IF NOT EXISTS schema_migrations (version BIGINT PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)",
        );
        const done = new Set((await t.all("SELECT version FROM schema_migrations")).map((r) => Number(r.version)));
        let v = Math.max(0, ...done);
        for (const m of MIGRATIONS) {
          if (done.has(m.version)) continue;
          for (const stmt of m.sql) await t.run(stmt);
          await t.run("INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)", [m.version, m.name, Date.now()]);
          v = m.version;
        }
        return v;
      },
      { migration: true },
    );
  }

  /**
   * Writes records in one transaction; a record id already there is left as it is (the stream may
   * deliver an entry again after a crash between commit and acknowledgement). Returns the new ones.
   */
  async insert(recs: readonly { record: UsageRecord; streamId: string }[]): Promise<UsageRecord[]> {
    if (recs.length === 0) return [];
    const stmt = `INSERT INTO usage_records (${COLS.join(", ")}) VALUES (${COLS.map(() => "?").join(", ")}) ON CONFLICT (record_id) DO NOTHING`;
    const now = Date.now();
    return this.sql.tx(async (t) => {
      const added: UsageRecord[] = [];
      for (const r of recs) if ((await t.run(stmt, toRow(r.record, r.streamId, now))) > 0) added.push(r.record);
      return added;
    });
  }

  /** The records of one job (every attempt), or the one record with that record id. */
  async job(id: string): Promise<UsageRecord[]> {
    return (await this.sql.all("SELECT * FROM usage_records WHERE job_id = ? OR record_id = ? ORDER BY end_time, record_id", [id, id])).map(
      fromRow,
    );
  }

  async count(): Promise<number> {
    return Number((await this.sql.all("SELECT COUNT(*) AS c FROM usage_records"))[0]?.c ?? 0);
  }

  /** Jobs, wall and CPU seconds by VO, owner or month (of the end time, UTC), optionally within [from, to] (epoch s). */
  async totals(by: TotalsBy, range: { from?: number; to?: number } = {}): Promise<TotalRow[]> {
    const key = TOTAL_KEY[by];
    const rows = await this.sql.all(
      `SELECT ${key} AS k, COUNT(*) AS jobs, SUM(wall_seconds) AS wall, SUM(cpu_seconds) AS cpu FROM usage_records
       WHERE end_time >= ? AND end_time <= ? GROUP BY ${key} ORDER BY ${key}`,
      [range.from ?? 0, range.to ?? Number.MAX_SAFE_INTEGER],
    );
    return rows.map((r) => ({ key: String(r.k), jobs: Number(r.jobs), wallSeconds: Number(r.wall), cpuSeconds: Number(r.cpu) }));
  }

  /** Records that ended within [from, to] (epoch s), oldest first. */
  async endedBetween(from: number, to: number): Promise<UsageRecord[]> {
    return (
      await this.sql.all("SELECT * FROM usage_records WHERE end_time >= ? AND end_time <= ? ORDER BY end_time, record_id", [from, to])
    ).map(fromRow);
  }

  /** Records that ended in these months (`YYYY-MM`). */
  async inMonths(months: readonly string[]): Promise<UsageRecord[]> {
    if (months.length === 0) return [];
    return (
      await this.sql.all(
        `SELECT * FROM usage_records WHERE end_month IN (${months.map(() => "?").join(", ")}) ORDER BY end_time, record_id`,
        months,
      )
    ).map(fromRow);
  }

  /** Records not yet sent to `target`, oldest first. */
  async unsent(target: string, limit: number): Promise<UsageRecord[]> {
    return (
      await this.sql.all(
        `SELECT u.* FROM usage_records u LEFT JOIN apel_sent_records s ON s.target = ? AND s.record_id = u.record_id
       WHERE s.record_id IS NULL ORDER BY u.end_time, u.record_id LIMIT ?`,
        [target, limit],
      )
    ).map(fromRow);
  }

  async markSent(target: string, recordIds: readonly string[], messageId: string): Promise<void> {
    const now = Date.now();
    await this.sql.tx(async (t) => {
      for (const id of recordIds) {
        await t.run(
          "INSERT INTO apel_sent_records (target, record_id, message_id, sent_at) VALUES (?, ?, ?, ?) ON CONFLICT (target, record_id) DO UPDATE SET message_id = excluded.message_id, sent_at = excluded.sent_at",
          [target, id, messageId, now],
        );
      }
    });
  }

  /** Months that ended records, with their record count. */
  async months(): Promise<string[]> {
    return (await this.sql.all("SELECT DISTINCT end_month FROM usage_records ORDER BY end_month")).map((r) => String(r.end_month));
  }

  async summaryDigest(target: string, month: string): Promise<string | undefined> {
    const r = (await this.sql.all("SELECT digest FROM apel_sent_summaries WHERE target = ? AND month = ?", [target, month]))[0];
    return r ? String(r.digest) : undefined;
  }

  async markSummarySent(target: string, month: string, digest: string, messageId: string): Promise<void> {
    await this.sql.run(
      "INSERT INTO apel_sent_summaries (target, month, digest, message_id, sent_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT (target, month) DO UPDATE SET digest = excluded.digest, message_id = excluded.message_id, sent_at = excluded.sent_at",
      [target, month, digest, messageId, Date.now()],
    );
  }

  async close(): Promise<void> {
    await this.sql.close();
  }
}

export type { Sql, SqlTx };
