import type { Redis } from "ioredis";
import { Keys } from "./keys.js";

/**
 * Redis trouble that is not a bug: the server is down or restarting, failing over, out of memory,
 * refusing writes after a failed snapshot (MISCONF), a read-only replica, still loading its data.
 * Callers back off and retry (JEM) or answer 503 (gateway) instead of failing the job or the process.
 */
export type RedisTrouble = "down" | "timeout" | "oom" | "misconf" | "readonly" | "loading" | "failover";

const REPLY_TROUBLE: readonly [RegExp, RedisTrouble][] = [
  [/\bOOM command not allowed\b/, "oom"],
  [/\bMISCONF\b/, "misconf"],
  [/\bREADONLY\b/, "readonly"],
  [/\bLOADING\b/, "loading"],
  // UNBLOCKED: a blocked command (BullMQ's BZPOPMIN) released because the primary became a replica.
  [/\b(MASTERDOWN|CLUSTERDOWN|TRYAGAIN|NOREPLICAS|FAILOVER|UNBLOCKED)\b/, "failover"],
];
const CONNECTION_TROUBLE = [
  "Connection is closed",
  "Stream isn't writeable",
  "Reached the max retries per request limit",
  "None of the sentinels are available",
  "Failed to refresh slots cache",
  "All sentinels are unreachable",
  "connect ECONNREFUSED",
];
const CONNECTION_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "EPIPE",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENOTCONN",
  "ECONNABORTED",
]);

/** What kind of Redis trouble `err` (or an error in its `cause` chain) is; undefined for anything else. */
export function redisTrouble(err: unknown): RedisTrouble | undefined {
  for (let e = err, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    if (typeof e !== "object") break;
    const { name, message, code } = e as { name?: string; message?: string; code?: string };
    const msg = String(message ?? "");
    if (name === "MaxRetriesPerRequestError" || name === "ClusterAllFailedError") return "down";
    if (msg === "Command timed out") return "timeout";
    for (const [re, kind] of REPLY_TROUBLE) if (re.test(msg)) return kind;
    if (code && CONNECTION_CODES.has(code)) return "down";
    if (CONNECTION_TROUBLE.some((s) => msg.includes(s))) return "down";
  }
  return undefined;
}

export const TROUBLE_TEXT: Record<RedisTrouble, string> = {
  down: "Redis is unreachable",
  timeout: "Redis did not answer in time",
  oom: "Redis is out of memory",
  misconf: "Redis refuses writes (its last snapshot failed)",
  readonly: "Redis is a read-only replica (failover in progress?)",
  loading: "Redis is still loading its data",
  failover: "Redis is failing over",
};

export interface OutageOptions {
  /** A harmless write that succeeds only when Redis accepts writes again (see `writeProbe`). */
  probe: () => Promise<unknown>;
  /**
   * Called once when an episode starts and once when it ends. `aftershock`: it started within
   * `quietMs` of the previous one's end — connections still reconnecting, a flapping server — and
   * callers log it quietly so one outage stays one episode in the log.
   */
  onDown: (info: { kind: RedisTrouble; err: unknown; aftershock: boolean }) => void;
  onUp: (info: { downMs: number; kind: RedisTrouble; aftershock: boolean }) => void;
  /** See `aftershock` (ms, default 15 s). */
  quietMs?: number;
  /** First and longest pause between probes (ms). */
  minDelayMs?: number;
  maxDelayMs?: number;
  /** A probe not answered in this time counts as failed (ms). */
  probeTimeoutMs?: number;
}

/**
 * One Redis outage episode at a time, per process: the first failure opens it (one log line),
 * a single probe loop with exponential back-off watches for the end (one log line), and every
 * caller that hit the trouble waits on that one loop instead of retrying on its own — so a
 * thousand jobs in flight mean two log lines and one probe every few seconds, not a storm.
 */
export class RedisOutage {
  private episode: { since: number; kind: RedisTrouble; over: Promise<void>; end: () => void; aftershock: boolean } | undefined;
  private lastEnd = 0;
  private wake: (() => void) | undefined;
  private stopped = false;
  private readonly minDelay: number;
  private readonly maxDelay: number;
  private readonly probeTimeout: number;

  constructor(private readonly opts: OutageOptions) {
    this.minDelay = opts.minDelayMs ?? 250;
    this.maxDelay = opts.maxDelayMs ?? 5_000;
    this.probeTimeout = opts.probeTimeoutMs ?? 5_000;
  }

  /** True while an episode is open. */
  get down(): boolean {
    return this.episode !== undefined;
  }

  /** Start of the open episode (ms), if any. */
  get since(): number | undefined {
    return this.episode?.since;
  }

  /**
   * Records `err` if it is Redis trouble (opening an episode if none is open) and returns its kind;
   * returns undefined, recording nothing, for any other error.
   */
  report(err: unknown): RedisTrouble | undefined {
    const kind = redisTrouble(err);
    if (!kind || this.stopped) return kind;
    if (!this.episode) {
      let end!: () => void;
      const over = new Promise<void>((r) => (end = r));
      const aftershock = Date.now() - this.lastEnd < (this.opts.quietMs ?? 15_000);
      this.episode = { since: Date.now(), kind, over, end, aftershock };
      this.opts.onDown({ kind, err, aftershock });
      void this.watch();
    }
    return kind;
  }

  /** Resolves when no episode is open (at once if none is), or when stopped. */
  async waitUntilUp(): Promise<void> {
    await this.episode?.over;
  }

  /**
   * Runs `fn` until it succeeds or fails with something other than Redis trouble; after Redis
   * trouble it waits for the episode to end and runs `fn` again from the start, so `fn` must be
   * safe to redo (every JEM step is: it re-reads the job and changes it by CAS).
   */
  async retry<T>(fn: () => Promise<T>): Promise<T> {
    for (;;) {
      try {
        return await fn();
      } catch (e) {
        if (this.stopped || !this.report(e)) throw e;
        await this.waitUntilUp();
        if (this.stopped) throw e;
      }
    }
  }

  /** Probes at once instead of after the current pause (a connection just became ready). */
  nudge(): void {
    this.wake?.();
  }

  /** Ends the probe loop and releases every waiter (process shutdown). */
  stop(): void {
    this.stopped = true;
    this.episode?.end();
    this.episode = undefined;
  }

  private async watch(): Promise<void> {
    let delay = this.minDelay;
    while (this.episode && !this.stopped) {
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, delay);
        t.unref();
        this.wake = () => (clearTimeout(t), resolve());
      });
      this.wake = undefined;
      if (!this.episode || this.stopped) return;
      try {
        await withTimeout(this.opts.probe(), this.probeTimeout);
      } catch (e) {
        const kind = redisTrouble(e);
        if (kind && this.episode) this.episode.kind = kind;
        delay = Math.min(this.maxDelay, delay * 2);
        continue;
      }
      const ep = this.episode;
      this.episode = undefined;
      if (!ep) return;
      this.lastEnd = Date.now();
      this.opts.onUp({ downMs: Date.now() - ep.since, kind: ep.kind, aftershock: ep.aftershock });
      ep.end();
    }
  }
}

/** The probe of `RedisOutage`: a short-lived SET under the CE prefix (refused while Redis refuses writes). */
export function writeProbe(redis: Redis, prefix: string, who: string): () => Promise<unknown> {
  const key = new Keys(prefix).health(who);
  return () => redis.set(key, String(Date.now()), "PX", 60_000);
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const t = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(Object.assign(new Error("Command timed out"), { name: "ProbeTimeout" })), ms);
  });
  return Promise.race([p, t]).finally(() => clearTimeout(timer));
}
