import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import Database from "better-sqlite3";
import type { Param, Row, Sql, SqlTx } from "./sql.js";

/**
 * SQLite through better-sqlite3 (synchronous; statements are small and indexed). WAL mode, so
 * `ceadm accounting` reads while the JEM writes; `busy_timeout` rides out the other's write lock.
 * Transactions are BEGIN IMMEDIATE: the write lock is taken up front, never upgraded mid-way.
 */
/**
 * Transactions on one file are taken in turn within a process: a second connection's BEGIN
 * IMMEDIATE would block the thread (busy_timeout) while the first, awaiting, cannot finish.
 */
const turns = new Map<string, Promise<unknown>>();

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
  async function txNow<T>(fn: (t: SqlTx) => Promise<T>): Promise<T> {
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
  }
  async function tx<T>(fn: (t: SqlTx) => Promise<T>): Promise<T> {
    // One connection: a nested call joins the running transaction.
    if (depth > 0) return fn(t);
    const before = turns.get(path) ?? Promise.resolve();
    let release!: () => void;
    const mine = new Promise<void>((r) => (release = r));
    const chained = before.then(() => mine);
    turns.set(path, chained);
    await before;
    try {
      return await txNow(fn);
    } finally {
      release();
      if (turns.get(path) === chained) turns.delete(path);
    }
  }
  return {
    kind: "sqlite",
    all: t.all,
    // A lone write takes its turn like a transaction (it would wait on the lock the same way).
    run: (sql, params) => (depth > 0 ? t.run(sql, params) : tx((x) => x.run(sql, params))),
    tx,
    async close() {
      db.close();
    },
  };
}
