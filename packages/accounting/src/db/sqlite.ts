import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import Database from "better-sqlite3";
import type { Param, Row, Sql, SqlTx } from "./sql.js";

/**
 * SQLite through better-sqlite3 (synchronous; statements are small and indexed). WAL mode, so
 * `ceadm accounting` reads while the JEM writes; `busy_timeout` rides out the other's write lock.
 * Transactions are BEGIN IMMEDIATE: the write lock is taken up front, never upgraded mid-way.
 */
export function openSqlite(path: string): Sql {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const db = new Database(path);
  db.pragma("journal_mode = WAL");
  db.pragma("busy_timeout = 10000");
  db.pragma("synchronous = FULL");
  const stmts = new Map<string, Database.Statement>();
  const prep = (sql: string) => {
    let s = stmts.get(sql);
    if (!s) stmts.set(sql, (s = db.prepare(sql)));
    return s;
  };
  const t: SqlTx = {
    all: async (sql, params: readonly Param[] = []) => {
      const s = prep(sql);
      return s.reader ? (s.all(...params) as Row[]) : (s.run(...params), []);
    },
    run: async (sql, params: readonly Param[] = []) => prep(sql).run(...params).changes,
  };
  let depth = 0;
  return {
    kind: "sqlite",
    ...t,
    async tx(fn) {
      // One connection: a nested call joins the running transaction.
      if (depth > 0) return fn(t);
      db.exec("BEGIN IMMEDIATE");
      depth++;
      try {
        const out = await fn(t);
        db.exec("COMMIT");
        return out;
      } catch (e) {
        db.exec("ROLLBACK");
        throw e;
      } finally {
        depth--;
      }
    },
    async close() {
      db.close();
    },
  };
}
