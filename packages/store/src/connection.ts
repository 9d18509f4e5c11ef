import type { ConnectionOptions } from "bullmq";
import { Cluster, Redis, type ClusterNode, type ClusterOptions, type RedisOptions, type SentinelAddress } from "ioredis";
import { readPasswordFile, redactRedisUrl, redisAuth, type CompiledConfig, type RedisAuth, type RedisRole } from "@ce/config";

/**
 * THE way a CE process connects to Redis (gateways, JEM, ceadm): standalone, Sentinel or Cluster
 * from `config.redis.mode`, logged in as the role's ACL user. It returns the store's command
 * connection and what BullMQ takes for its queues and workers, built from the same settings.
 */
export type RedisConfig = Pick<CompiledConfig["redis"], "mode" | "url" | "sentinel" | "cluster" | "users">;
/** `ceadm` logs in as the JEM's ACL user but fails fast instead of waiting for Redis. */
export type RedisClientRole = RedisRole | "ceadm";

const ACL_USER: Record<RedisClientRole, RedisRole> = { gateway: "gateway", jem: "jem", ceadm: "jem" };

/**
 * Longest a gateway request waits for one Redis command (ms): a Redis that is down, restarting or
 * hung turns into a 503 within a few seconds; the largest legitimate command (a 10,000-id bulk
 * read, a 500-job commit) takes well under a second.
 */
export const GATEWAY_COMMAND_TIMEOUT_MS = 5_000;

/**
 * BullMQ's connection per role. JEM workers block (BZPOPMIN...) and need maxRetriesPerRequest
 * null; the gateway's queues only add jobs, and an add must fail as fast as any other command of
 * a request instead of waiting in the offline queue for Redis to come back.
 */
const BULL_OPTIONS: Record<RedisClientRole, RedisOptions> = {
  gateway: { maxRetriesPerRequest: 2, enableOfflineQueue: false, commandTimeout: GATEWAY_COMMAND_TIMEOUT_MS },
  jem: { maxRetriesPerRequest: null },
  ceadm: { maxRetriesPerRequest: null },
};

/** Per-role client behaviour, the same in every mode. */
const ROLE_OPTIONS: Record<RedisClientRole, RedisOptions> = {
  // A request fails at once while the connection is down (no offline queue: the caller answers 503
  // with Retry-After; wait for `ready` once at boot) and never waits longer than
  // GATEWAY_COMMAND_TIMEOUT_MS. Reads of one request are batched by explicit pipelines in the store.
  // No auto-pipelining: ioredis' implementation throws from a callback when a pipeline meets a
  // dropped connection ("results[i] is not iterable", redis/ioredis#1931) — an uncaught exception
  // that ends the process; seen here when Redis went away with commands in flight.
  gateway: { maxRetriesPerRequest: 2, enableOfflineQueue: false, enableAutoPipelining: false, commandTimeout: GATEWAY_COMMAND_TIMEOUT_MS },
  // The daemon waits for Redis: commands queue while the connection is re-established.
  jem: { maxRetriesPerRequest: null },
  // A one-shot command: one try, no reconnect loop; connect() is explicit so its error can be reported.
  ceadm: { lazyConnect: true, maxRetriesPerRequest: 1, connectTimeout: 5_000, retryStrategy: () => null },
};

export interface RedisClients {
  /**
   * The command connection (JobStore, locks, quotas, ...). In cluster mode this is an ioredis
   * `Cluster`, typed as `Redis`: the command API is the same and every CE key lives in the one
   * `{prefix}` slot; use `subscriber()` rather than `duplicate()` (different signatures).
   */
  redis: Redis;
  /** What `openQueue` and BullMQ workers take (options in standalone/Sentinel mode, a shared Cluster client in cluster mode). */
  bull: ConnectionOptions;
  /** A new, not yet connected connection for SUBSCRIBE (no ready check: INFO is refused in subscriber mode). */
  subscriber(): Redis;
  /** Quits `redis` and the shared BullMQ client; call after the queues and workers are closed. */
  close(): Promise<void>;
}

const hostPort = (s: string): { host: string; port: number } => {
  const i = s.lastIndexOf(":");
  return { host: s.slice(0, i).replace(/^\[(.*)\]$/, "$1"), port: Number(s.slice(i + 1)) };
};

const isReadonly = (err: Error) => err.message.startsWith("READONLY");

/** Sentinel: ask the sentinels for the primary, follow +switch-master, reconnect when a demoted primary answers READONLY. */
function sentinelOptions(cfg: RedisConfig, auth: RedisAuth): RedisOptions {
  const { nodes, masterName, passwordFile } = cfg.sentinel;
  if (nodes.length === 0) throw new Error("redis.mode is sentinel but redis.sentinel.nodes is empty");
  return {
    sentinels: nodes.map(hostPort) as Partial<SentinelAddress>[],
    name: masterName,
    role: "master",
    failoverDetector: true,
    // 2 = reconnect and resend the command that met the demoted primary.
    reconnectOnError: (err) => (isReadonly(err) ? 2 : false),
    ...(passwordFile ? { sentinelPassword: readPasswordFile(passwordFile, "redis.sentinel.passwordFile") } : {}),
    ...auth,
  };
}

function clusterOptions(role: RedisOptions, auth: RedisAuth): ClusterOptions {
  const { enableAutoPipelining, lazyConnect, retryStrategy, ...node } = role;
  return {
    redisOptions: { ...node, ...auth },
    ...(enableAutoPipelining !== undefined ? { enableAutoPipelining } : {}),
    ...(lazyConnect !== undefined ? { lazyConnect } : {}),
    ...(retryStrategy ? { clusterRetryStrategy: retryStrategy } : {}),
    // A failover moves the slot: retry MOVED/CLUSTERDOWN/TRYAGAIN for a while before giving up.
    retryDelayOnFailover: 200,
    retryDelayOnClusterDown: 200,
  };
}

function clusterNodes(cfg: RedisConfig): ClusterNode[] {
  if (cfg.cluster.nodes.length === 0) throw new Error("redis.mode is cluster but redis.cluster.nodes is empty");
  return cfg.cluster.nodes.map(hostPort);
}

/** Connects `role` to the Redis of `cfg` (the password files are read here, at boot). */
export function connectRedis(cfg: RedisConfig, role: RedisClientRole): RedisClients {
  const auth = redisAuth(cfg, ACL_USER[role]);
  const opts = ROLE_OPTIONS[role];
  if (cfg.mode === "cluster") {
    const nodes = clusterNodes(cfg);
    const redis = new Cluster(nodes, clusterOptions(opts, auth));
    // BullMQ's blocking commands need maxRetriesPerRequest null; one client for every queue of the
    // process (workers duplicate it for their blocking connection), created on first use.
    let bull: Cluster | undefined;
    const bullClient = () => (bull ??= new Cluster(nodes, clusterOptions(BULL_OPTIONS[role], auth)));
    return {
      redis: redis as unknown as Redis,
      get bull() {
        return bullClient();
      },
      subscriber: () =>
        new Cluster(nodes, { ...clusterOptions({ ...opts, lazyConnect: true }, auth), enableReadyCheck: false }) as unknown as Redis,
      close: () => closeAll([redis, bull]),
    };
  }
  const base: RedisOptions = cfg.mode === "sentinel" ? sentinelOptions(cfg, auth) : {};
  const redis = cfg.mode === "sentinel" ? new Redis({ ...base, ...opts }) : new Redis(cfg.url, { ...opts, ...auth });
  let closing = false;
  // ceadm runs one command and must fail, not loop; the daemons' connections must never end by themselves.
  const daemon = role !== "ceadm";
  if (daemon) keepConnected(redis, () => closing);
  const bullOptions: RedisOptions = {
    ...(cfg.mode === "sentinel" ? base : (bullConnection(cfg.url, auth) as RedisOptions)),
    ...BULL_OPTIONS[role],
  };
  // The daemons' queues and workers: BullMQ would open its own unguarded connections from options;
  // one shared client instead, whose duplicates (the workers' blocking connections) are guarded too.
  let bull: Redis | undefined;
  const bullClient = () => (bull ??= guardedBullClient(bullOptions));
  return {
    redis,
    get bull(): ConnectionOptions {
      return daemon ? bullClient() : bullOptions;
    },
    subscriber: () => {
      const sub = redis.duplicate({ lazyConnect: true, enableReadyCheck: false });
      // The subscriber ends like any Sentinel connection; connected again, ioredis subscribes again.
      return daemon ? keepConnectedUntilClosed(sub) : sub;
    },
    close: () => ((closing = true), closeAll([redis, bull])),
  };
}

/**
 * BullMQ's client of a daemon (standalone/Sentinel): kept connected until closed, and so is every
 * duplicate BullMQ makes of it (a worker's blocking connection is one). Created on first use.
 */
function guardedBullClient(opts: RedisOptions): Redis {
  const client = keepConnectedUntilClosed(new Redis(opts));
  const duplicate = client.duplicate.bind(client);
  client.duplicate = (override?: Partial<RedisOptions>) => keepConnectedUntilClosed(duplicate(override));
  return client;
}

/** Pause before connecting again a connection that ioredis gave up (ms). */
export const RECONNECT_AFTER_END_MS = 500;

/**
 * Connects `redis` again whenever it ends while `closing()` is false. ioredis ends a Sentinel
 * connection for good when a failover cuts its primary look-up short: the failover detector's
 * disconnect makes the connector's pending connect() reject ("Connection is closed.") and the
 * client goes to status "end" instead of retrying, so every later command fails at once — a
 * gateway answered 503 to everything after a failover until it was restarted
 * (tests/ha/sentinel.serial.test.ts). BullMQ's shared client and its duplicates: keepConnectedUntilClosed.
 */
export function keepConnected(redis: Redis, closing: () => boolean = () => false): void {
  redis.on("end", () => {
    if (closing()) return;
    const t = setTimeout(() => {
      // connect() is refused unless the client is still "end"; a failure ends it again, and this runs again.
      if (!closing() && redis.status === "end") redis.connect().catch(() => undefined);
    }, RECONNECT_AFTER_END_MS);
    t.unref();
  });
}

/**
 * `keepConnected` for a connection whose owner (BullMQ, the JEM's subscriber) ends it with quit()
 * or disconnect(): that end stays, until the owner connects it again (BullMQ drops and reconnects
 * a worker's blocking connection itself). ioredis' own disconnects (failover detector, reconnect
 * on error) go through its connector or pass reconnect = true, never here.
 */
export function keepConnectedUntilClosed(redis: Redis): Redis {
  let closed = false;
  const { quit, disconnect, connect } = redis;
  redis.disconnect = (reconnect?: boolean) => {
    if (!reconnect) closed = true;
    disconnect.call(redis, reconnect);
  };
  redis.quit = ((...args: Parameters<Redis["quit"]>) => {
    closed = true;
    return quit.apply(redis, args);
  }) as Redis["quit"];
  redis.connect = (callback?: Parameters<Redis["connect"]>[0]) => {
    closed = false;
    return connect.call(redis, callback);
  };
  keepConnected(redis, () => closed);
  return redis;
}

/** QUIT where connected (pending replies are flushed), otherwise just drop the socket and the reconnect loop. */
async function closeAll(clients: (Redis | Cluster | undefined)[]): Promise<void> {
  await Promise.all(
    clients.map(async (c) => {
      if (!c || c.status === "end") return;
      if (c.status === "ready") await c.quit().catch(() => c.disconnect());
      else c.disconnect();
    }),
  );
}

/** Where `cfg` points, for a log line or an error message (no credentials). */
export function describeRedis(cfg: Pick<RedisConfig, "mode" | "url" | "sentinel" | "cluster">): string {
  if (cfg.mode === "sentinel") return `Sentinel primary "${cfg.sentinel.masterName}" via ${cfg.sentinel.nodes.join(",")}`;
  if (cfg.mode === "cluster") return `Redis Cluster via ${cfg.cluster.nodes.join(",")}`;
  return redactRedisUrl(cfg.url);
}

/**
 * BullMQ connection options from a standalone Redis URL plus the process's ACL credentials
 * (`redisAuth` of @ce/config), which take precedence over any userinfo in the URL.
 */
export function bullConnection(url: string, auth: RedisAuth = {}): ConnectionOptions {
  const u = new URL(url);
  const username = auth.username ?? (u.username ? decodeURIComponent(u.username) : undefined);
  const password = auth.password ?? (u.password ? decodeURIComponent(u.password) : undefined);
  return {
    host: u.hostname,
    port: Number(u.port || 6379),
    ...(password ? { password } : {}),
    ...(username ? { username } : {}),
    ...(u.pathname.length > 1 ? { db: Number(u.pathname.slice(1)) } : {}),
    maxRetriesPerRequest: null,
  };
}

/**
 * Redis `WAIT` as a group commit: `confirm()` resolves with how many replicas (up to `replicas`)
 * hold every write this connection sent before the call, waiting at most `timeoutMs`. WAIT
 * blocks the connection it is sent on, so concurrent callers share rounds: at most one WAIT is in
 * flight; a caller arriving during a round joins the next one (sent after the round ends, hence
 * after the caller's writes). With no replica reachable the connection is held for at most
 * `timeoutMs` per round. The durability setting `redis.waitReplicas` is built on it.
 */
export class ReplicaBarrier {
  private current: Promise<number> | undefined;
  private queued: Promise<number> | undefined;

  constructor(
    private readonly redis: Redis,
    readonly replicas: number,
    readonly timeoutMs: number,
  ) {}

  confirm(): Promise<number> {
    if (!this.current) return (this.current = this.round());
    this.queued ??= this.current
      .catch(() => 0)
      .then(() => {
        this.queued = undefined;
        return (this.current ??= this.round());
      });
    return this.queued;
  }

  private round(): Promise<number> {
    let timer: NodeJS.Timeout | undefined;
    // A WAIT caught in a reconnect (failover) can stay unanswered: the round gives up on its own
    // (0 confirmed) so the next callers get a fresh WAIT instead of waiting behind it forever.
    const guard = new Promise<number>((resolve) => (timer = setTimeout(() => resolve(0), this.timeoutMs + 1_000)));
    const wait = this.redis.call("WAIT", this.replicas, this.timeoutMs).then(Number);
    const p: Promise<number> = Promise.race([wait, guard]).finally(() => {
      clearTimeout(timer);
      if (this.current === p) this.current = undefined;
    });
    wait.catch(() => undefined); // settled after the guard: nobody listens any more
    return p;
  }
}
