import { randomUUID } from "node:crypto";
import type { Redis } from "ioredis";
import { Keys } from "./keys.js";
import { runScript } from "./scripts.js";

/**
 * Submission holds: only a submission whose 201 was handed to the client runs its jobs (at most
 * once, whatever happens between the commit and the answer).
 *
 * The gateway creates a request's jobs held (`hold` = the request's key on each record, the key in
 * `Keys.holds` with a deadline; lua/create.lua), the JEM never advances a held job, and then:
 * - the 201 has been handed to the socket → `release` (ONE Redis call per request): the jobs run;
 * - the answer is not a 201 after records were written (replica confirmation failed, an error), or
 *   the connection broke before the answer was written → `withdraw`: the jobs never run;
 * - nobody did either (the gateway died, Redis lost the release in a failover) → at the deadline
 *   the JEM, looking at the job (it is due then), withdraws the request (`expire`).
 * A withdrawn job stays visible, FAILED with a reason saying its submission was not confirmed.
 * Release and withdrawal are atomic against each other (lua/hold-release|hold-withdraw.lua): a
 * request is one or the other, once, with any number of gateways and JEMs.
 */
export type HoldVerdict = { verdict: "held"; until: number } | { verdict: "withdrawn" } | { verdict: "ended" };

/** The reason a withdrawn job shows (its `failure`, REST FAILED). */
export const WITHDRAWN_REASON =
  "Submission not confirmed: the CE never handed the answer to this submission (201 with the job ids) to the client, so the job was withdrawn without running; submit it again";

export class SubmissionHolds {
  readonly keys: Keys;

  constructor(
    private readonly redis: Redis,
    prefix: string,
  ) {
    this.keys = new Keys(prefix);
  }

  /** A fresh request key (never the client's request id, which a client may repeat). */
  static newKey(): string {
    return randomUUID();
  }

  /**
   * The answer (a 201 listing `ids`) is in the socket: the jobs may run. `admittedDue`: when jobs
   * admitted at creation (waiting only for uploads) are due (their upload deadline). Returns false
   * when the request was withdrawn before (its jobs never run).
   */
  async release(key: string, ids: readonly string[], admittedDue = 0, now = Date.now()): Promise<boolean> {
    const k = this.keys;
    return (
      Number(
        await runScript(
          this.redis,
          "ceHoldRelease",
          [k.holds(), k.advanceDue(), k.advanceBell()],
          [key, now, Math.ceil(admittedDue), k.prefix, ...ids],
        ),
      ) === 1
    );
  }

  /** The request will not be answered 201 (or the answer never left): its jobs never run. True when this call withdrew it. */
  async withdraw(key: string, ids: readonly string[], now = Date.now()): Promise<boolean> {
    return (await this.call(key, "force", ids, now)).verdict === "withdrawn";
  }

  /** The JEM's check of a held job: withdraws the request once its deadline has passed. */
  async expire(key: string, now = Date.now()): Promise<HoldVerdict> {
    return this.call(key, "expired", [], now);
  }

  /** Requests held right now (metrics, tests). */
  async count(): Promise<number> {
    return this.redis.zcard(this.keys.holds());
  }

  private async call(key: string, mode: "force" | "expired", ids: readonly string[], now: number): Promise<HoldVerdict> {
    const k = this.keys;
    const [verdict, until] = (await runScript(
      this.redis,
      "ceHoldWithdraw",
      [k.holds(), k.advanceDue(), k.advanceBell()],
      [key, now, mode, ...ids],
    )) as [string, string | null];
    if (verdict === "held") return { verdict, until: Number(until) };
    if (verdict === "withdrawn") return { verdict };
    return { verdict: "ended" };
  }
}
