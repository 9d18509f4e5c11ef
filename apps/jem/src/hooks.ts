import type { CompiledConfig } from "@ce/config";
import { lookupAccounts, type Account } from "@ce/mapping";
import type { JobRecord } from "@ce/store";
import type { Logger } from "pino";
import { runScript, type ScriptResult } from "./lrms/run-script.js";
import { jobIdentity } from "./lrms/placement.js";
import { FairSlots } from "./semaphore.js";

/**
 * State hooks (`jobs.hooks`, docs/state-hooks.md): A-REX's `statecallout`. A site script runs when
 * a job enters a state, as the configured account, never as root, with a timeout (its whole
 * process group is killed) and at most `concurrency` at once. At ACCEPTED the JEM waits for it and
 * a non-zero exit refuses the job; elsewhere the call is not waited for, so a slow or broken hook
 * never holds a job or a JEM slot. A hook that times out or cannot run is logged and, unless the
 * site chose `onError: refuse`, passes. Hook slots are fair between job owners (see the constructor).
 */

export type HookState = CompiledConfig["jobs"]["hooks"]["scripts"][number]["state"];
export type HookOutcome = { kind: "pass" } | { kind: "refuse"; reason: string };

/** Calls waiting for a slot, beyond which informational calls are dropped (logged). */
const NOTIFY_BACKLOG = 1_000;
/** How long a looked-up account is used before it is looked up again. */
const ACCOUNT_TTL_MS = 60_000;

function clean(text: string): string {
  return text
    .replace(/[\x00-\x1f\x7f]+/g, " ")
    .trim()
    .slice(0, 300);
}

/** What the user reads when a hook refuses: its first stdout line, else its last stderr line. */
export function refusalReason(r: Pick<ScriptResult, "stdout" | "stderr" | "exitCode" | "signal">): string {
  const first = r.stdout.split("\n").map(clean).find(Boolean);
  const last = r.stderr.split("\n").map(clean).filter(Boolean).at(-1);
  return (
    first ?? last ?? `the site's hook ended with ${r.exitCode !== undefined ? `exit code ${r.exitCode}` : `signal ${r.signal ?? "?"}`}`
  );
}

export class StateHooks {
  private readonly slots: FairSlots;
  private waiting = 0;
  private account: { at: number; value: Promise<Account | undefined> } | undefined;
  private readonly log: Logger;

  constructor(
    private readonly config: CompiledConfig,
    log: Logger,
  ) {
    // Slots are shared by owners in turn, and one owner holds at most all but one of them: one
    // user's jobs whose hooks hang (a quota service that stalls on that VO) delay that user's
    // other jobs, never another user's, by more than one turn.
    const n = config.jobs.hooks.concurrency;
    this.slots = new FairSlots(n, Math.max(1, n - 1));
    this.log = log.child({ component: "hooks" });
  }

  has(state: HookState): boolean {
    return this.config.jobs.hooks.scripts.some((s) => s.state === state);
  }

  /** ACCEPTED: every hook of the state in turn; the first refusal wins. */
  async check(state: HookState, job: JobRecord): Promise<HookOutcome> {
    for (const hook of this.config.jobs.hooks.scripts.filter((s) => s.state === state)) {
      const r = await this.run(hook.command, state, job);
      if (r.kind === "exit" && r.result.exitCode === 0) continue;
      if (r.kind === "exit" && !r.result.timedOut && r.result.exitCode !== undefined)
        return { kind: "refuse", reason: refusalReason(r.result) };
      const why =
        r.kind === "error"
          ? r.reason
          : r.result.timedOut
            ? `timed out after ${this.config.jobs.hooks.timeoutSeconds} s`
            : refusalReason(r.result);
      this.log.warn({ jobId: job.id, state, command: hook.command[0], reason: why, onError: hook.onError }, "state hook did not answer");
      if (hook.onError === "refuse") return { kind: "refuse", reason: `the site's admission check did not answer (${why})` };
    }
    return { kind: "pass" };
  }

  /** Any other state: started, not waited for; a full backlog drops the call (logged). */
  notify(state: HookState, job: JobRecord): void {
    for (const hook of this.config.jobs.hooks.scripts.filter((s) => s.state === state)) {
      if (this.waiting >= NOTIFY_BACKLOG) {
        this.log.warn({ jobId: job.id, state, command: hook.command[0] }, "state hook dropped: too many calls waiting");
        continue;
      }
      void this.run(hook.command, state, job).then((r) => {
        if (r.kind === "error" || r.result.exitCode !== 0) {
          this.log.warn(
            {
              jobId: job.id,
              state,
              command: hook.command[0],
              reason: r.kind === "error" ? r.reason : r.result.timedOut ? "timed out" : refusalReason(r.result),
            },
            "state hook failed",
          );
        }
      });
    }
  }

  private lookup(): Promise<Account | undefined> {
    const now = Date.now();
    if (!this.account || now - this.account.at > ACCOUNT_TTL_MS) {
      const name = this.config.jobs.hooks.account;
      this.account = { at: now, value: lookupAccounts([name]).then((m) => m.get(name)) };
    }
    return this.account.value;
  }

  private async run(
    command: string[],
    state: HookState,
    job: JobRecord,
  ): Promise<{ kind: "exit"; result: ScriptResult } | { kind: "error"; reason: string }> {
    this.waiting++;
    let granted = false;
    try {
      return await this.slots.run(job.ownerKey, async () => {
        granted = true;
        this.waiting--;
        let file = command[0]!;
        let args = [...command.slice(1), job.id, state];
        // Root runs hooks as the configured account only; a JEM that is not root runs them as itself.
        if (process.getuid?.() === 0) {
          const as = await this.lookup().catch(() => undefined);
          if (!as || as.uid === 0)
            return {
              kind: "error" as const,
              reason: `hook account ${this.config.jobs.hooks.account} ${as ? "is root" : "does not exist"}`,
            };
          args = [`--reuid=${as.uid}`, `--regid=${as.gid}`, "--init-groups", "--", file, ...args];
          file = "setpriv";
        }
        const id = jobIdentity(job.owner, job.fqans);
        const env = {
          PATH: "/usr/local/bin:/usr/bin:/bin",
          LANG: "C.UTF-8",
          CE_JOB_ID: job.id,
          CE_JOB_STATE: state,
          CE_JOB_OWNER: job.owner,
          CE_JOB_VO: id.vos?.[0] ?? "",
          CE_JOB_FQANS: (job.fqans ?? []).join(","),
          CE_JOB_QUEUE: job.queue,
          CE_JOB_LOCAL_ACCOUNT: job.localUser?.account ?? "",
        };
        const result = await runScript(file, args, {
          timeoutMs: this.config.jobs.hooks.timeoutSeconds * 1000,
          env,
          extendEnv: false,
          cwd: "/",
        });
        if (result.spawnError) return { kind: "error" as const, reason: `cannot run ${command[0]}: ${result.spawnError}` };
        return { kind: "exit" as const, result };
      });
    } catch (e) {
      return { kind: "error", reason: (e as Error).message };
    } finally {
      if (!granted) this.waiting--;
    }
  }
}
