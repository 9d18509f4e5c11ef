import type { ServerResponse } from "node:http";
import { SubmissionHolds } from "@ce/store";
import type { Logger } from "pino";

const RELEASE_RETRY_MS = 500;

/**
 * The submission hold of one request (@ce/store holds.ts): the jobs it creates cannot run until
 * the whole 201 is in the socket. Made by the durability middleware for every request that may
 * write; only a submission uses it (submit.ts: `begin` before the create, `created` after the
 * commit). Costs nothing unless jobs were created; then one Redis call when the answer is written.
 */
export class RequestHold {
  private stamp?: { key: string; until: number };
  private readonly ids = new Set<string>();
  private admittedDue = 0;
  /** Jobs the create committed (created() is called only when there are some). */
  private committed = 0;
  private ended = false;

  /**
   * `confirm`: with `redis.waitReplicas`, whether the replicas hold the writes so far. The release
   * is then repeated until they hold it: a failover must not lose it (the new primary would
   * withdraw jobs whose 201 the client has).
   */
  constructor(
    private readonly holds: SubmissionHolds,
    private readonly holdMs: number,
    private readonly log: Logger | undefined,
    private readonly confirm?: () => Promise<boolean>,
  ) {}

  /** The key and deadline the request's records are created with (the first call fixes them). */
  begin(ids: readonly string[]): { key: string; until: number } {
    // Every id the create may have committed: a commit whose reply was lost still left records.
    for (const id of ids) this.ids.add(id);
    return (this.stamp ??= { key: SubmissionHolds.newKey(), until: Date.now() + this.holdMs });
  }

  /**
   * After a commit that created `jobs` jobs: when the jobs admitted at creation are due once
   * released (their upload deadline).
   */
  created(admittedDue: number, jobs: number): void {
    this.admittedDue = admittedDue;
    this.committed += jobs;
  }

  get used(): boolean {
    return this.stamp !== undefined;
  }

  /**
   * The answer is a 201 the client must get before the jobs run: released once the response is
   * handed whole to the socket ('finish'); withdrawn if the connection closes first. Without a
   * socket (the app driven in-process) the caller has the answer now: released at once.
   */
  async releaseAfter(outgoing: ServerResponse | undefined): Promise<void> {
    if (!this.stamp) return;
    // A 201 whose every item was refused (a quota, a limit): no record carries the hold, so there
    // is nothing to release or withdraw, and nothing to report as withdrawn.
    if (this.committed === 0) {
      this.ended = true;
      return;
    }
    if (!outgoing) return this.release();
    // Closed already: neither event would come, and the answer cannot be written any more.
    if (outgoing.destroyed) return this.withdraw("the connection closed before the answer was written");
    outgoing.once("finish", () => void this.release());
    outgoing.once("close", () => {
      if (!outgoing.writableFinished) void this.withdraw("the connection closed before the answer was written");
    });
  }

  /** The jobs never run (the answer is not a 201, or never left). Best effort: the JEM withdraws past the deadline anyway. */
  async withdraw(why: string): Promise<void> {
    const s = this.stamp;
    if (!s || this.ended) return;
    this.ended = true;
    try {
      const withdrawn = await this.holds.withdraw(s.key, [...this.ids]);
      this.log?.warn({ hold: s.key, jobs: this.ids.size, withdrawn }, `submission withdrawn: ${why}; its jobs will not run`);
    } catch (err) {
      this.log?.warn(
        { err, hold: s.key, jobs: this.ids.size },
        `submission not withdrawn now (${why}): the JEM withdraws it at its hold deadline`,
      );
    }
  }

  /** The answer is in the socket: the jobs may run. Retried through Redis trouble until the deadline. */
  private async release(): Promise<void> {
    const s = this.stamp;
    if (!s || this.ended) return;
    this.ended = true;
    for (let attempt = 1; ; attempt++) {
      try {
        if (!(await this.holds.release(s.key, [...this.ids], this.admittedDue))) {
          // Later attempts find the hold gone when an earlier one did release it.
          if (attempt === 1)
            this.log?.warn(
              { hold: s.key, jobs: this.committed },
              `submission answered 201 but its hold had already ended: its ${this.committed} job(s) were withdrawn and fail without running`,
            );
          return;
        }
        if (!this.confirm || (await this.confirm())) return;
        // Not on the replicas yet: released again (a no-op where it held) after a pause.
        if (Date.now() + RELEASE_RETRY_MS >= s.until) {
          this.log?.warn(
            { hold: s.key, jobs: this.ids.size },
            "release of a submission hold not confirmed by the replicas before its deadline",
          );
          return;
        }
        await new Promise((r) => setTimeout(r, RELEASE_RETRY_MS));
      } catch (err) {
        if (Date.now() + RELEASE_RETRY_MS >= s.until) {
          this.log?.error(
            { err, hold: s.key, jobs: this.ids.size },
            "submission hold not released before its deadline: its jobs will be withdrawn (failed, never run)",
          );
          return;
        }
        await new Promise((r) => setTimeout(r, RELEASE_RETRY_MS));
      }
    }
  }
}
