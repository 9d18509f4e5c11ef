import pg from "pg";
import type { Param, Row, Sql, SqlTx } from "./sql.js";

/** `?` placeholders → `$1, $2, …` (no statement of ours has a `?` inside a literal). */
const numbered = (sql: string) => {
  let i = 0;
  return sql.replace(/\?/g, () => `$${++i}`);
};

/** BIGINT comes back as text from pg (it may not fit a double); ours are counts and seconds that do. */
pg.types.setTypeParser(20, (v: string) => Number(v));

/** PostgreSQL through a small pg pool: several head nodes write one database. */
export function openPostgres(url: string): Sql {
  const pool = new pg.Pool({ connectionString: url, max: 4 });
  // An idle client's error (server restart) must not crash the JEM; the next query reconnects.
  pool.on("error", () => undefined);
  const on = (c: pg.Pool | pg.PoolClient): SqlTx => ({
    all: async (sql, params: readonly Param[] = []) => (await c.query(numbered(sql), [...params])).rows as Row[],
    run: async (sql, params: readonly Param[] = []) => (await c.query(numbered(sql), [...params])).rowCount ?? 0,
  });
  return {
    kind: "postgres",
    ...on(pool),
    async tx(fn, opts) {
      const c = await pool.connect();
      try {
        await c.query("BEGIN");
        // Two JEMs starting together: one migrates, the other waits and then finds it done.
        if (opts?.migration) await c.query("SELECT pg_advisory_xact_lock(7243110)");
        const out = await fn(on(c));
        await c.query("COMMIT");
        return out;
      } catch (e) {
        await c.query("ROLLBACK").catch(() => undefined);
        throw e;
      } finally {
        c.release();
      }
    },
    async close() {
      await pool.end();
    },
  };
}
