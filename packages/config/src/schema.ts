import { z } from "zod";
import { isIP } from "node:net";
import { mappingSchema } from "./mapping.js";
import { accountingSchema, benchmarkSchema } from "./accounting.js";

/** `address/prefix` (or one address) with the prefix in range for the family. */
function isCidr(text: string): boolean {
  const [net = "", bits, extra] = text.split("/");
  const max = isIP(net) === 4 ? 32 : isIP(net) === 6 ? 128 : 0;
  return max > 0 && extra === undefined && (bits === undefined || (/^\d{1,3}$/.test(bits) && Number(bits) <= max));
}

/** `scheme://host[:port]` with an http(s) scheme and nothing after it: what a browser's `Origin` header holds. */
function isOrigin(text: string): boolean {
  if (!URL.canParse(text)) return false;
  const u = new URL(text);
  return (u.protocol === "https:" || u.protocol === "http:") && `${u.origin}/` === u.href;
}

/**
 * The one configuration schema of the CE, shared by the gateway, the JEM and the admin tool.
 * Every key has a default so an empty file gives the embedded development setup; the
 * configuration reference (docs/configuration.md) is generated from these descriptions (`pnpm config:doc`).
 */

const duration = z.number().int().nonnegative();
const bytes = z.number().int().positive();

const queueSchema = z.object({
  name: z.string().regex(/^[A-Za-z0-9_.-]+$/, "queue names are letters, digits, _ . -"),
  /** Slurm partition for this queue (default: same as name). Ignored by the fork back end. */
  partition: z.string().optional(),
  maxWallTimeSeconds: duration.optional(),
  maxCpuTimeSeconds: duration.optional(),
  maxMainMemoryMB: z.number().int().positive().optional(),
  maxSlotsPerJob: z.number().int().positive().optional(),
  /**
   * GPUs a job may ask for in this queue (xRSL gpus, ADL Coprocessor); more is a per-item 403 at
   * submission; absent: no limit; 0: none. Above 0 it is published in GLUE2 (docs/gpus.md).
   */
  maxGpusPerJob: z.number().int().min(0).optional(),
  defaultWallTimeSeconds: duration.optional(),
  defaultMemoryMB: z.number().int().positive().optional(),
  /** Who may submit to this queue; empty = everyone allowed to use the CE. Same rule syntax as auth.allow. */
  allow: z.array(z.string()).default([]),
  /**
   * VOs published with a GLUE2 share `<queue>_<vo>` each (brokers such as DIRAC look for it). Default:
   * the VOs named by `vo:`/`fqan:`/`group:` rules of this queue's allow, else of auth.allow, else of mapping rules.
   */
  vos: z.array(z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/, "VO names are letters, digits, . _ -")).optional(),
  /** GLUE2 benchmarks of this queue's nodes, type → value (e.g. `{ HEPscore23: 12.5 }`). */
  benchmarks: z
    .record(z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, "benchmark types are letters, digits, _ . -"), z.number().nonnegative())
    .default({}),
  /** CPU benchmark of this queue's nodes, per core (accounting, APEL). */
  benchmark: benchmarkSchema.optional(),
});
export type QueueConfig = z.infer<typeof queueSchema>;

const tokenIssuerSchema = z.object({
  /** Exact `iss` value. */
  issuer: z.string().url(),
  /** Override of the JWKS URL; default: discovered through /.well-known/openid-configuration. */
  jwksUri: z.string().url().optional(),
  /** Extra CA bundle (PEM file) trusted for this issuer's HTTPS endpoints (tests, private CAs). */
  caFile: z.string().optional(),
});

/** `host:port` of a Sentinel or Cluster node. */
const hostPort = z.string().regex(/^[^\s:]+:\d{1,5}$|^\[[0-9A-Fa-f:.]+\]:\d{1,5}$/, "host:port");

const redisUserSchema = (name: string) =>
  z
    .object({
      username: z
        .string()
        .regex(/^[A-Za-z0-9_.-]+$/, "Redis user names are letters, digits, _ . -")
        .default(name),
      passwordFile: z.string().optional(),
    })
    .default({});

export const configSchema = z.object({
  endpoint: z
    .object({
      /** Public URL of the service endpoint, without `/rest` (published in /info as ComputingEndpoint URL). */
      url: z.string().url().default("https://localhost:8443/arex"),
      /** Name of the admin domain published in GLUE2. */
      adminDomain: z.string().default("DEV"),
    })
    .default({}),

  paths: z
    .object({
      /** Root of everything the dev setup generates (certificates, redis data, control, sessions). */
      stateDir: z.string().default(".ce"),
      /** Control directory (shared between gateways and JEMs). Default: <stateDir>/control */
      controlDir: z.string().optional(),
      /** Session directory root (shared between gateways, JEMs and worker nodes). Default: <stateDir>/session */
      sessionRoot: z.string().optional(),
      /**
       * Where the batch jobs' own dirs (`<id>.lrms`: job script, proxy, diag, lrms_done) and the
       * completion doorbells (`.events/`) live. Default: the session root, shared with the worker
       * nodes. With `lrms.sharedSession: false` a head-node directory (0711) keeps them apart, so
       * the session root can be the CE's alone (docs/operations.md "What the worker nodes share").
       */
      batchRoot: z.string().optional(),
      /** Runtime environment scripts: <rteDir>/<NAME> (names may contain `/`). Default: <stateDir>/rte */
      rteDir: z.string().optional(),
    })
    .default({}),

  redis: z
    .object({
      /**
       * How the CE reaches Redis (one connection factory for both apps and ceadm: @ce/store
       * `connectRedis`). `standalone`: `url`. `sentinel`: ask `sentinel.nodes` for the primary of
       * `sentinel.masterName` and follow failovers. `cluster`: Redis Cluster from `cluster.nodes`
       * (every CE key is in the `prefix` hash slot: Cluster gives failover, not sharding).
       */
      mode: z.enum(["standalone", "sentinel", "cluster"]).default("standalone"),
      /** Host and port (`standalone`). A password in the URL still works but is discouraged: use `users.*.passwordFile`. */
      url: z.string().default("redis://127.0.0.1:6379"),
      sentinel: z
        .object({
          /** Sentinels, `host:port` (three or more on separate hosts for a quorum). */
          nodes: z.array(hostPort).default([]),
          /** Name of the monitored primary (`sentinel monitor <name> ...`). */
          masterName: z.string().default("ce"),
          /** Sentinels' own `requirepass`: absolute path of a file, mode 0600; absent: the sentinels take no password. */
          passwordFile: z.string().optional(),
        })
        .default({}),
      cluster: z
        .object({
          /** Seed nodes, `host:port`; the rest of the cluster is discovered from them. */
          nodes: z.array(hostPort).default([]),
        })
        .default({}),
      /**
       * Replicas that must hold a request's writes before its 201/202 leaves the gateway (Redis
       * `WAIT`): with 1, an acknowledged submission or kill/clean/restart survives the loss of the
       * primary (Sentinel failover). Not confirmed within `waitTimeoutMs` → 503 + Retry-After (the
       * writes may still be there: the client retries). 0: answer once the primary has them.
       */
      waitReplicas: z.number().int().min(0).default(0),
      waitTimeoutMs: z.number().int().positive().default(1_000),
      /** Key prefix; the `{...}` hash tag keeps every key in one slot so Lua scripts work on Redis Cluster. */
      prefix: z
        .string()
        .regex(/^\{[A-Za-z0-9_.-]+\}$/, "prefix must be a Redis hash tag such as {ce}")
        .default("{ce}"),
      /** `embedded`: `pnpm start` starts a local redis-server (ACL users, passwords in <stateDir>/secrets) under <stateDir>/redis. */
      embedded: z.boolean().default(false),
      /**
       * ACL user per app: gateways log in as `users.gateway`, the JEM and ceadm as `users.jem`. The
       * password is read at boot from `passwordFile` (mode 0600, only the CE account); embedded
       * default: <stateDir>/secrets/redis-<app>.password. No file: no credentials sent.
       */
      users: z
        .object({
          gateway: redisUserSchema("gateway"),
          jem: redisUserSchema("jem"),
        })
        .default({}),
    })
    .default({}),

  gateway: z
    .object({
      host: z.string().default("127.0.0.1"),
      port: z.number().int().min(0).max(65535).default(8443),
      tls: z
        .object({
          certFile: z.string().optional(),
          keyFile: z.string().optional(),
        })
        .default({}),
      /** Plain HTTP behind a TLS-terminating proxy. Off unless explicitly enabled. */
      plainHttp: z
        .object({
          enabled: z.boolean().default(false),
          /** Only these peer addresses may forward a client certificate. */
          trustedProxies: z.array(z.string()).default([]),
          /** Header carrying the URL-encoded PEM client chain (nginx `$ssl_client_escaped_cert`). */
          clientCertHeader: z.string().default("x-ssl-client-cert"),
        })
        .default({}),
      /**
       * Origins (`scheme://host[:port]`) besides endpoint.url's from which a browser may send a
       * state-changing request: another DNS name of the same CE, or a gateway's own name where people
       * reach it directly. A request whose `Origin` is none of them is refused 403 CROSS_SITE_REFUSED
       * (apps/gateway/src/middleware/cross-site/README.md).
       */
      extraOrigins: z
        .array(
          z
            .string()
            .url()
            .refine((u) => isOrigin(u), "an origin is scheme://host[:port] (http or https), without path, query or fragment"),
        )
        .default([]),
      limits: z
        .object({
          descriptionBytes: bytes.default(5 * 1024 * 1024),
          idListBytes: bytes.default(1024 * 1024),
          delegationBytes: bytes.default(1024 * 1024),
          uploadBytes: bytes.default(16 * 1024 * 1024 * 1024),
          idsPerRequest: z.number().int().positive().default(10_000),
          jobsPerSubmission: z.number().int().positive().default(1_000),
          /**
           * Requests per second per identity (token bucket refill) and burst, shared by all gateways;
           * 0 disables. Abuse protection, not fairness: each gateway leases tokens in blocks of 50 ms
           * of refill (100 at 2,000/s) from the Redis bucket, so an identity may get up to one block
           * per gateway beyond the limit.
           */
          requestsPerSecond: z.number().nonnegative().default(2_000),
          requestBurst: z.number().int().positive().default(4_000),
          /** Requests one identity may have in progress at once on one gateway; more → 429 TOO_MANY_IN_FLIGHT. 0 = no cap. */
          requestsInFlight: z.number().int().nonnegative().default(64),
          /** Entries one session directory listing (GET, PROPFIND Depth 1) may return; more → 507. */
          listingEntries: z.number().int().positive().default(10_000),
          /**
           * Bytes of files one "download all" archive of a session directory (a page's tar link) may
           * hold; more → 507 ARCHIVE_TOO_LARGE before a byte is sent. At most 8 GiB − 1 (ustar sizes).
           */
          archiveBytes: bytes.max(0o77777777777).default(4 * 1024 * 1024 * 1024),
          /** Disjoint byte ranges tracked per partially uploaded file (Content-Range PUTs); more → 409. */
          uploadRanges: z.number().int().positive().default(1_024),
          /** Files of one job with partial-upload bookkeeping at once; more → 409. */
          partialUploadsPerJob: z.number().int().positive().default(1_000),
        })
        .default({}),
      /** Connection-level bounds (slowloris, idle sockets, one client hogging the listener). */
      connections: z
        .object({
          /** Whole request head must arrive within this. */
          headersTimeoutSeconds: duration.default(30),
          /** Whole request (head and body) must arrive within this; 0 = no limit (uploads are long). */
          requestTimeoutSeconds: duration.default(6 * 3600),
          /** A socket with no traffic for this long is closed (also mid-body). */
          idleTimeoutSeconds: duration.default(120),
          /** Idle keep-alive connections are closed after this. */
          keepAliveTimeoutSeconds: duration.default(65),
          /** Concurrent connections per client address (trusted proxies exempt); more are closed at once. 0 = no cap. */
          maxPerAddress: z.number().int().nonnegative().default(128),
          /** Request head size (request line + headers; the proxy's client-certificate header included). */
          maxHeaderBytes: bytes.default(32 * 1024),
        })
        .default({}),
      /**
       * Uses of Node, V8 and pino internals for speed, each listed in apps/gateway/src/runtime-internals.ts
       * with the test that checks it on the Node version in use. Turning one off falls back to public API.
       */
      internals: z
        .object({
          /** Take upload body chunks from Node's HTTP parser (an own `push` on the request) instead of stream events. */
          parserBodyIntake: z.boolean().default(true),
          /** Page-aligned slabs from a `WebAssembly.Memory` for O_DIRECT session transfers; off: all through the page cache. */
          alignedMemory: z.boolean().default(true),
          /** Access-log lines written straight to pino's destination (`pino.symbols`); off: `logger.info`. */
          pinoAccessLog: z.boolean().default(true),
          /** Set V8's `--no-concurrent-array-buffer-sweeping` at start (fewer full GCs during uploads); off: V8's default. */
          v8ArrayBufferSweeping: z.boolean().default(true),
        })
        .default({}),
    })
    .default({}),

  /** Per-owner quotas, enforced atomically in Redis and shared by all gateways. */
  quotas: z
    .object({
      /** Jobs one owner may hold in every state but WIPED (403 per item above). */
      jobsPerOwner: z.number().int().positive().default(20_000),
      /** Bytes uploaded into one job's session directory (507 above). */
      sessionBytesPerJob: bytes.default(100 * 1024 ** 3),
      /** Bytes uploaded into all session directories of one owner (507 above). */
      sessionBytesPerOwner: bytes.default(1024 ** 4),
      /** Delegations one owner may hold (403 above; the ARC client makes one per job). */
      delegationsPerOwner: z.number().int().positive().default(10_000),
      /** Delegation renewals per owner per minute (429 above). */
      delegationRenewalsPerMinute: z.number().int().positive().default(120),
    })
    .default({}),

  auth: z
    .object({
      /** CA directory in OpenSSL hashed layout (X509_CERT_DIR). Default: <stateDir>/pki/ca */
      caDir: z.string().optional(),
      /**
       * Who may use the CE at all. Rules: `dn:<glob>`, `ca:<issuer DN glob>`, `iss:<issuer URL>`,
       * `group:<wlcg.groups entry>`, `*`. Empty = every authenticated identity.
       */
      allow: z.array(z.string()).default([]),
      deny: z.array(z.string()).default([]),
      /** Serve /info and /rest (versions) without authentication. */
      infoPublic: z.boolean().default(false),
      /** X.509 trust policy and the bounds on a presented chain (SECURITY.md, "Identity"). */
      x509: z
        .object({
          /** A CRL past its nextUpdate: `deny` refuses every certificate its CA issued; `allow` keeps using it. */
          crlExpired: z.enum(["deny", "allow"]).default("deny"),
          /** A `<hash>.rN` CRL file that does not parse or verify: `deny` refuses that CA; `allow` ignores the file. */
          crlUnparsable: z.enum(["deny", "allow"]).default("deny"),
          /** CA `.namespaces`/`.signing_policy`: `enforce` where present, `require` for every CA, or `ignore`. */
          namespaces: z.enum(["enforce", "require", "ignore"]).default("enforce"),
          /** Issuing CAs that need a CRL in caDir: `intermediates` a client presents (not installed), `all`, or `none`. */
          crlRequired: z.enum(["intermediates", "all", "none"]).default("intermediates"),
          /** Most certificates a client may present (leaf, proxies, intermediates). */
          maxChainCertificates: z.number().int().min(2).max(64).default(16),
          /** RSA key sizes accepted in a presented chain (bits). */
          minRsaBits: z.number().int().min(512).default(1024),
          maxRsaBits: z.number().int().max(16384).default(8192),
        })
        .default({}),
      /** VOMS attributes in X.509 proxies (FQANs), verified against the CA directory and the vomsdir. */
      voms: z
        .object({
          /** vomsdir layout: `<dir>/<vo>/<host>.lsc` (or the server's certificate). Default: <stateDir>/pki/vomsdir */
          dir: z.string().optional(),
          /** A proxy whose AC does not verify: `refuse` (401 naming the reason, as VOMS-aware services do) or `ignore` the AC. */
          invalidAc: z.enum(["refuse", "ignore"]).default("refuse"),
          /** Names a targeted AC must carry one of; default: the endpoint's host name. */
          hostNames: z.array(z.string()).default([]),
        })
        .default({}),
      tokens: z
        .object({
          enabled: z.boolean().default(true),
          issuers: z.array(tokenIssuerSchema).default([]),
          /** Accepted `aud` values; default: the endpoint origin (scheme://host[:port]). */
          audiences: z.array(z.string()).default([]),
          /** Also accept the WLCG "any" audience https://wlcg.cern.ch/jwt/v1/any. */
          allowAnyAudience: z.boolean().default(false),
          algorithms: z.array(z.enum(["RS256", "ES256", "EdDSA"])).default(["RS256", "ES256"]),
          leewaySeconds: duration.default(60),
          jwksCacheSeconds: duration.default(3600),
          /** Require WLCG compute.* scopes per operation. */
          requireScopes: z.boolean().default(true),
        })
        .default({}),
    })
    .default({}),

  delegations: z
    .object({
      /** 32 bytes, base64, AES-256-GCM key for private keys and tokens at rest. Dev default generated on first start. */
      encryptionKey: z.string().optional(),
      encryptionKeyFile: z.string().optional(),
      /** RSA key pairs generated ahead of time for `POST /delegations?action=new`. */
      keyPoolSize: z.number().int().min(0).default(16),
      /** Unused (never PUT) delegation slots expire after this. */
      pendingLifetimeSeconds: duration.default(24 * 3600),
    })
    .default({}),

  jobs: z
    .object({
      queues: z.array(queueSchema).default([{ name: "main", allow: [] }]),
      /** Queue for descriptions that name none (and without the 1.1 `queue` parameter). Default: first queue. */
      defaultQueue: z.string().optional(),
      /** Refuse new jobs (drain). */
      allowNew: z.boolean().default(true),
      maxTotal: z.number().int().positive().default(100_000),
      maxActivePerOwner: z.number().int().positive().default(10_000),
      maxInLrms: z.number().int().positive().default(5_000),
      maxStaging: z.number().int().positive().default(100),
      maxRerun: z.number().int().min(0).default(5),
      /** Session dir lifetime after the job ended (description `lifetime` may only shorten it). */
      sessionLifetimeSeconds: duration.default(7 * 24 * 3600),
      /** How long the minimal WIPED record stays after that. */
      wipedRecordSeconds: duration.default(30 * 24 * 3600),
      uploadTimeoutSeconds: duration.default(600),
      /**
       * Jobs of a submission cannot run before the gateway has written its 201; a submission
       * whose answer was not written within this time (the gateway died) is withdrawn: its jobs
       * fail without running (@ce/store holds.ts).
       */
      submissionHoldSeconds: z.number().int().positive().default(60),
      /** Runtime environments published and accepted, besides those of `ceadm rte enable` (docs/runtime-environments.md). */
      runtimeEnvironments: z.array(z.string()).default([]),
      /** Runtime environments added to every job. */
      defaultRuntimeEnvironments: z.array(z.string()).default([]),
      /**
       * Site scripts run when a job enters a state (docs/state-hooks.md), as `account`, with the
       * job's id and state as arguments and CE_JOB_* variables; at most `concurrency` at once, each
       * ended after `timeoutSeconds`. At ACCEPTED a non-zero exit refuses the job with the script's
       * first output line as the reason; elsewhere hooks only inform.
       */
      hooks: z
        .object({
          account: z
            .string()
            .regex(/^[a-z_][a-z0-9_.-]*\$?$/i, "a local account name")
            .default("nobody"),
          concurrency: z.number().int().positive().default(4),
          timeoutSeconds: z.number().int().positive().default(10),
          scripts: z
            .array(
              z.object({
                state: z.enum(["ACCEPTED", "PREPARING", "SUBMIT", "INLRMS", "CANCELING", "FINISHING", "FINISHED", "DELETED"]),
                /** argv (no shell): the program and its first arguments. */
                command: z.array(z.string()).min(1),
                /** A hook that timed out or could not run: `pass` lets the job go on, `refuse` refuses it (ACCEPTED). */
                onError: z.enum(["pass", "refuse"]).default("pass"),
              }),
            )
            .default([]),
        })
        .default({}),
    })
    .default({}),

  lrms: z
    .object({
      backend: z
        .enum(["fork", "slurm", "sge"])
        .or(z.string().regex(/^[a-z0-9_-]+$/))
        .default("fork"),
      /** Directory holding <backend>/{submit,cancel,poll} scripts. Default: the shipped apps/jem/backends. */
      scriptsDir: z.string().optional(),
      pollIntervalMs: z.number().int().positive().default(2_000),
      /**
       * Token bucket on batch-system operations, per back end: one per job submitted or cancelled
       * and one per poll query, however many a script call carries. 0 = no limit. Default by back
       * end: fork 0 (nothing to protect), slurm 100/s, burst 100 (protects slurmctld), any
       * other 20/s.
       */
      callsPerSecond: z.number().min(0).optional(),
      scriptTimeoutMs: z.number().int().positive().default(60_000),
      /**
       * Whether the worker nodes share the session root with the CE (docs/operations.md "What the
       * worker nodes share"). false: nothing is shared; the batch script carries the CE's URL
       * (`endpoint.url`), the CA to trust it (`nodeCaFile`) and a capability for its one job, and
       * the wrapper fetches the inputs over HTTPS into `scratchDir` and sends the outputs, its
       * diag and the exit code back, with curl.
       */
      sharedSession: z.boolean().default(true),
      /**
       * Node-local directory the wrapper works in when `sharedSession` is false (a private
       * `<scratchDir>/<job id>.XXXXXX` per job, removed at its end); also where the batch system
       * starts the job there. An absolute path present on every node.
       */
      scratchDir: z
        .string()
        .regex(/^\/[A-Za-z0-9_.\/-]*$/, "an absolute path of plain characters")
        .default("/tmp"),
      /** PEM file of the CA(s) a node trusts the CE's `endpoint.url` with (`sharedSession: false`); required then. */
      nodeCaFile: z.string().optional(),
      /** Containment and limits of the fork back end (docs/fork-containment.md). */
      fork: z
        .object({
          /** Per-job cgroup: auto (v2 with memory+pids, else v1 freezer, else v2 without controllers), v2, v1, or off (process group and uid only). */
          cgroup: z.enum(["auto", "v2", "v1", "off"]).default("auto"),
          /** Where the cgroup hierarchies are mounted. */
          cgroupMount: z.string().default("/sys/fs/cgroup"),
          /** The parent cgroup of every job's (relative to each hierarchy; created when missing). */
          cgroupParent: z
            .string()
            .regex(/^[A-Za-z0-9_.-]+(\/[A-Za-z0-9_.-]+)*$/, "a relative cgroup path")
            .default("ce-jobs"),
          /** Slots published in GLUE2 (TotalSlots, FreeSlots); default: this host's CPU count. */
          slots: z.number().int().positive().optional(),
          /** Tests only: multiplies walltime and CPU time limits (the description's units are kept; 0.05 makes 1 minute 3 s). */
          timeLimitScale: z.number().positive().max(1).default(1),
        })
        .default({}),
      slurm: z
        .object({
          binPath: z.string().default("/usr/bin"),
          /** Extra `#SBATCH` lines added to every job. */
          extraDirectives: z.array(z.string()).default([]),
          /** How long the gateway uses one `sinfo` answer for the slot numbers in /info. */
          infoRefreshSeconds: z.number().int().positive().default(60),
          /**
           * Where a job goes in Slurm by who submitted it (docs/placement.md): the first rule whose
           * `match` conditions all hold (`vo:`, `fqan:`, `group:`, `dn:`, `sub:`, `kind:`, `*`, as in
           * auth.allow) gives the job's Slurm account (`-A`, over the description's project), QOS,
           * partition and extra `#SBATCH` lines.
           */
          placement: z
            .array(
              z.object({
                match: z
                  .array(z.string().regex(/^(\*|(vo|fqan|group|dn|sub|kind):.+)$/, "a rule vo:, fqan:, group:, dn:, sub:, kind: or *"))
                  .min(1),
                account: z
                  .string()
                  .regex(/^[A-Za-z0-9_.-]{1,64}$/)
                  .optional(),
                qos: z
                  .string()
                  .regex(/^[A-Za-z0-9_.-]{1,64}$/)
                  .optional(),
                partition: z
                  .string()
                  .regex(/^[A-Za-z0-9_.-]{1,64}$/)
                  .optional(),
                directives: z.array(z.string().regex(/^[^\n\r]+$/, "one line")).default([]),
              }),
            )
            .default([]),
        })
        .default({}),
      /** Grid Engine back end (docs/gridengine.md); the cell is the JEM's environment (SGE_ROOT, SGE_CELL, ports). */
      sge: z
        .object({
          binPath: z.string().default("/usr/bin"),
          /** Parallel environment for jobs of more than one slot (`qsub -pe <pe> N`); none = such jobs are refused. */
          parallelEnvironment: z
            .string()
            .regex(/^[A-Za-z0-9_.-]{1,64}$/)
            .optional(),
          /** How long /info uses one `qhost -q` answer for the queues' slot numbers. */
          infoRefreshSeconds: z.number().int().positive().default(60),
        })
        .default({}),
    })
    .default({}),

  staging: z
    .object({
      maxConcurrentTransfers: z.number().int().positive().default(10),
      /** Transfers of one owner (DN) at once; default half of maxConcurrentTransfers. Waiting owners are served in turn. */
      maxTransfersPerOwner: z.number().int().positive().optional(),
      maxRetries: z.number().int().min(0).default(5),
      retryBaseMs: z.number().int().positive().default(2_000),
      /** Bound on one transfer attempt as a whole. */
      timeoutMs: z.number().int().positive().default(300_000),
      /** Bound on connecting (TCP + TLS) to a storage endpoint. */
      connectTimeoutMs: z.number().int().positive().default(15_000),
      /** Bound on waiting for response headers, and between two chunks of a body. */
      idleTimeoutMs: z.number().int().positive().default(60_000),
      /**
       * Networks (CIDRs, e.g. "10.20.0.0/16", "2001:db8::/48") staging may reach although they are
       * loopback, link-local, private or unique-local, which are refused by default. The CE's own
       * listeners and Redis stay refused.
       */
      allowNetworks: z.array(z.string().refine(isCidr, "a CIDR such as 10.0.0.0/8 or fd00::/8")).default([]),
      /**
       * Lines of all `@list` output lists of one job together (each list has at most 10,000). A job
       * over it fails at FINISHING with a reason naming this key; its outputs are not uploaded.
       */
      maxOutputListLines: z.number().int().positive().default(100_000),
      /** Extra CA bundle (PEM) trusted for remote storage endpoints (tests, private CAs). */
      caFile: z.string().optional(),
      /**
       * Send a token delegation to any https endpoint when its audience is the WLCG "any"
       * audience (https://wlcg.cern.ch/jwt/v1/any). Off: tokens go only to their `aud` origins.
       */
      allowAnyAudienceTokens: z.boolean().default(false),
      /**
       * Absolute path prefixes of read-only software areas shared with the worker nodes (e.g.
       * `/cvmfs/atlas.cern.ch`). An input naming a path under one is linked into the session
       * (the job reads it with its own rights); any other local path is refused at submission.
       * Only list areas that jobs cannot write.
       */
      localInputPrefixes: z.array(z.string().regex(/^\/[^\0]*[^/\0]\/?$/, "an absolute path other than /")).default([]),
      /**
       * `rucio://<server>/replicas/<scope>/<name>` inputs (docs/staging-protocols.md): the JEM asks
       * the Rucio server for replicas and downloads one, checking Rucio's size and checksum.
       */
      rucio: z
        .object({
          /**
           * Where X.509 proxies get a Rucio token when it is not the server's own
           * `https://<server>/auth/x509_proxy` (e.g. https://voatlasrucio-auth-prod.cern.ch/auth/x509_proxy).
           */
          authUrl: z
            .string()
            .url()
            .refine((u) => u.startsWith("https://"), "an https:// URL")
            .optional(),
          /** Rucio account when an input names none (`rucioaccount=`); none: Rucio's default for the identity. */
          account: z
            .string()
            .regex(/^[a-z0-9_-]{1,25}$/i, "a Rucio account name")
            .optional(),
          /** Bound on each call to Rucio (authentication, replica listing). */
          timeoutMs: z.number().int().positive().default(60_000),
        })
        .default({}),
      /**
       * The input cache (docs/cache.md): each remote input downloaded once per site and linked
       * into every session that names it. Off while `dirs` is empty.
       */
      cache: z
        .object({
          /**
           * Cache directories (on the file system the worker nodes see, like the session root).
           * `drain`: files are used and cleaned but no new ones are stored; `readonly`: files are
           * used (copied into sessions), never written nor cleaned.
           */
          dirs: z
            .array(z.object({ path: z.string().min(1), drain: z.boolean().default(false), readonly: z.boolean().default(false) }))
            .default([]),
          /** The `cache=` value of an input URL that names none (no, yes, check, invariant, renew, copy). */
          default: z.enum(["no", "yes", "check", "invariant", "renew", "copy"]).default("yes"),
          /** How long the origin's answer to "may this identity read this URL" is remembered. */
          permissionSeconds: z.number().int().min(0).default(3_600),
          /** The cleaner starts above this share of a cache file system's bytes (percent)… */
          highWatermarkPercent: z.number().min(1).max(100).default(90),
          /** …and removes least recently used files until usage is below this one. */
          lowWatermarkPercent: z.number().min(0).max(100).default(80),
          /** Bytes bounds that apply instead of the shares when set (a cache sharing its file system). */
          highWatermarkBytes: z.number().int().positive().optional(),
          lowWatermarkBytes: z.number().int().min(0).optional(),
          /** Files unused for this long are removed whatever the usage; 0 keeps them. */
          lifetimeSeconds: z
            .number()
            .int()
            .min(0)
            .default(30 * 86_400),
          /** How often the cleaner runs. */
          cleanIntervalSeconds: z.number().int().positive().default(300),
        })
        .default({}),
    })
    .default({}),

  jem: z
    .object({
      /** Concurrency of the job-advancing worker. */
      concurrency: z.number().int().positive().default(50),
      /** Fallback scan of the control directory when file events are unreliable (shared FS). */
      scanIntervalMs: z.number().int().positive().default(5_000),
      /** How often expiry (WIPED, record removal) is checked. */
      expiryIntervalMs: z.number().int().positive().default(60_000),
      /**
       * How often the control and session directories are walked for files of jobs without a
       * record (lost records). The walk is O(jobs on disk), so it runs rarely; 0 turns it off.
       */
      lostRecordSweepSeconds: z.number().int().min(0).default(3_600),
      /**
       * How often a JEM writes its heartbeat into Redis (`ce_jem_heartbeat_timestamp_seconds` on
       * every /metrics); the alert calls a JEM stale after three missed beats.
       */
      heartbeatIntervalMs: z.number().int().min(200).default(5_000),
    })
    .default({}),

  admin: z
    .object({
      enabled: z.boolean().default(true),
      host: z.string().default("127.0.0.1"),
      /** Admin listener of a gateway (metrics, health). */
      port: z.number().int().min(0).max(65535).default(8444),
      /** Admin listener of the JEM (metrics, health, BullMQ queue view at /queues). */
      jemPort: z.number().int().min(0).max(65535).default(8445),
      /** Bearer token for the admin listener. Dev default generated on first start. */
      token: z.string().optional(),
      tokenFile: z.string().optional(),
      /** Where the site publishes the operator documentation: linked from the admin listener's index page. */
      docsUrl: z.string().url().optional(),
    })
    .default({}),

  compat: z
    .object({
      /** Answer the literal codes of the interface text where deployed clients need others (docs/decisions.md). */
      strictSpecCodes: z.boolean().default(false),
    })
    .default({}),

  logging: z
    .object({
      level: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
      /** Where the JEM's log lines are kept (its stdout, as the process manager stores it): `ceadm jobs log` reads it. */
      jemLogFile: z.string().optional(),
    })
    .default({}),

  /** Usage records and APEL publishing (packages/config/src/accounting.ts). */
  accounting: accountingSchema,

  /** Grid identity → local account (packages/config/src/mapping.ts). Absent: mapping is off. */
  mapping: mappingSchema.optional(),
});

export type ConfigInput = z.input<typeof configSchema>;
export type Config = z.infer<typeof configSchema>;
