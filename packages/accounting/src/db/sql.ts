import { Failure } from "@ce/model";
/**
 * The little each database must offer: statements with `?` placeholders (PostgreSQL's are
 * numbered by its adapter), and a transaction. Everything else is shared (accounting-db.ts).
 */
export type Param = string | number | null;
export type Row = Record<string, unknown>;

export interface SqlTx {
  all(sql: string, params?: readonly Param[]): Promise<Row[]>;
  run(sql: string, params?: readonly Param[]): Promise<number>;
}

export interface Sql extends SqlTx {
  readonly kind: "sqlite" | "postgres";
  /** Runs `fn` in one transaction; `migration` also serializes it against other processes. */
  tx<T>(fn: (t: SqlTx) => Promise<T>, opts?: { migration?: boolean }): Promise<T>;
  close(): Promise<void>;
}

export class AccountingDbError extends Failure<"ACCT_DB"> {
  constructor(message: string, options?: { cause?: unknown }) {
    super("ACCT_DB", message, options);
  }
}
