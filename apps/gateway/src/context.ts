import type { Redis } from "ioredis";
import type { Logger } from "pino";
import type { CompiledConfig } from "@ce/config";
import type { AdvanceSet, DelegationStore, JobStore } from "@ce/store";
import type { ControlDir } from "@ce/controldir";
import type { KeyPool, TrustStore, VomsDir } from "@ce/x509";
import type { CeMetrics } from "@ce/ops";
import type { Mapper, MatchIdentity } from "@ce/mapping";
import type { RequestHold } from "./middleware/durability/hold.js";
/** Negotiated response format of structured responses. */
export type Format = "json" | "xml" | "html";

/**
 * Who is calling: derived only from the verified TLS chain or a verified token, never from a header.
 * The fields rules match on (subject, kind, issuer, scopes, groups/fqans/vos: identity/groups.ts)
 * are @ce/mapping's MatchIdentity; the gateway adds what only it needs.
 */
export interface Identity extends MatchIdentity {
  /** Earliest notAfter of the chain / token exp (ms). */
  expires?: number | undefined;
  /** A limited proxy (x509): may not start jobs (routes/jobs.ts). */
  limited?: boolean | undefined;
}

export interface Services {
  config: CompiledConfig;
  redis: Redis;
  jobs: JobStore;
  delegations: DelegationStore;
  control: ControlDir;
  /** The JEM's work list (@ce/store advance.ts): upload completions and kill/clean/restart ring it. */
  advance: AdvanceSet;
  trust: TrustStore;
  /** vomsdir: trusted VOMS servers per VO (`.lsc` files, certificates). */
  voms: VomsDir;
  keyPool: KeyPool;
  logger: Logger;
  /** Identity → local account (absent when the configuration has no `mapping` section). */
  mapper?: Mapper | undefined;
  /** Prometheus metrics (absent in unit harnesses that do not need them). */
  metrics?: CeMetrics | undefined;
  /** Closes `redis` and BullMQ's shared client (connectRedis); absent in harnesses, where `redis.quit()` is enough. */
  closeRedis?: (() => Promise<void>) | undefined;
}

export type ApiVersion = "1.0" | "1.1";

export interface AppEnv {
  Bindings: { incoming?: import("node:http").IncomingMessage; outgoing?: import("node:http").ServerResponse };
  Variables: {
    services: Services;
    requestId: string;
    log: Logger;
    /** Set by the identity middleware on every /rest request that passed authentication. */
    identity: Identity;
    /** Set by the version router. */
    version: ApiVersion;
    /** Negotiated response format of structured responses. */
    format: Format;
    /** The submission hold of a request that may write (durability middleware; used by submit.ts). */
    hold: RequestHold;
  };
}
