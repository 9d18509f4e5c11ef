/**
 * The accounting schema, one list of migrations for SQLite and PostgreSQL alike: only types and
 * statements both accept (TEXT, BIGINT, DOUBLE PRECISION, INSERT … ON CONFLICT). A migration is
 * applied once, in a transaction with its row in `schema_migrations`; never edit a shipped one,
 * add the next.
 */
export const MIGRATIONS: readonly { version: number; name: string; sql: readonly string[] }[] = [
  {
    version: 1,
    name: "usage records and APEL publishing state",
    sql: [
      `CREATE TABLE usage_records (
        record_id TEXT PRIMARY KEY,
        job_id TEXT NOT NULL,
        batch_id TEXT,
        owner TEXT NOT NULL,
        owner_dn TEXT,
        token_issuer TEXT,
        token_subject TEXT,
        vo TEXT NOT NULL,
        vo_group TEXT,
        vo_role TEXT,
        fqan TEXT,
        fqans TEXT NOT NULL,
        account TEXT,
        uid BIGINT,
        queue TEXT NOT NULL,
        partition TEXT,
        submit_time BIGINT NOT NULL,
        start_time BIGINT,
        end_time BIGINT NOT NULL,
        end_month TEXT NOT NULL,
        wall_seconds BIGINT NOT NULL,
        cpu_user_seconds BIGINT NOT NULL,
        cpu_system_seconds BIGINT NOT NULL,
        cpu_seconds BIGINT NOT NULL,
        max_rss_kb BIGINT,
        processors BIGINT NOT NULL,
        node_count BIGINT NOT NULL,
        nodes TEXT,
        exit_code BIGINT,
        state TEXT NOT NULL,
        failure_cause TEXT,
        failure TEXT,
        bytes_in BIGINT NOT NULL,
        bytes_out BIGINT NOT NULL,
        bytes_in_cache BIGINT NOT NULL,
        benchmark_type TEXT,
        benchmark_value DOUBLE PRECISION,
        stream_id TEXT NOT NULL,
        recorded_at BIGINT NOT NULL
      )`,
      `CREATE INDEX usage_records_end ON usage_records (end_time)`,
      `CREATE INDEX usage_records_job ON usage_records (job_id)`,
      `CREATE TABLE apel_sent_records (
        target TEXT NOT NULL,
        record_id TEXT NOT NULL,
        message_id TEXT NOT NULL,
        sent_at BIGINT NOT NULL,
        PRIMARY KEY (target, record_id)
      )`,
      `CREATE TABLE apel_sent_summaries (
        target TEXT NOT NULL,
        month TEXT NOT NULL,
        digest TEXT NOT NULL,
        message_id TEXT NOT NULL,
        sent_at BIGINT NOT NULL,
        PRIMARY KEY (target, month)
      )`,
    ],
  },
];
