import { readFile } from "node:fs/promises";
import type { CompiledConfig } from "@ce/config";
import {
  accessDecision,
  DestinationRefused,
  destinationPolicy,
  jobIdentity,
  Mapper,
  MappingConfigError,
  MappingRefused,
  type MatchIdentity,
  placementFor,
  queueDecision,
  shortFqan,
} from "@ce/mapping";
import { Failure, type JobDescription, parseDescriptionsSettled, tokenOwner } from "@ce/model";
import { JobStore } from "@ce/store";
import type { Redis } from "ioredis";
import type { AdminOps } from "../ops.js";

/*
 * `ceadm explain [--dn DN] [--fqan FQAN]... [--token FILE] [--queue Q] DESCRIPTION_FILE` (issue 36):
 * what the CE would do with this description from this identity, without submitting anything.
 * Every decision comes from the function a submission calls (@ce/mapping accessDecision,
 * queueDecision, Mapper.map with dryRun, placementFor; the model's parser with the gateway's
 * limits), so the answer cannot drift from the real path. Exit 0: accepted; 1: refused, naming the rule.
 */

export class ExplainUsageError extends Failure<"EXPLAIN_USAGE"> {
  constructor(message: string) {
    super("EXPLAIN_USAGE", message);
  }
}

export interface ExplainArgs {
  dn?: string | undefined;
  fqan?: string[] | undefined;
  token?: string | undefined;
  queue?: string | undefined;
  file?: string | undefined;
}

/** One check of the walk: what was decided, by which rule, and whether it refuses the job. */
export interface Step {
  step: string;
  ok: boolean;
  rule?: string | undefined;
  detail: string;
}

export interface Explanation {
  identity: { subject: string; kind: string; fqans: string[]; vos: string[] };
  accepted: boolean;
  /** Steps per description (a file may hold several). */
  jobs: { index: number; name?: string | undefined; accepted: boolean; steps: Step[] }[];
}

/** The identity the CE would see: a DN with VOMS FQANs, or a token's issuer, subject and groups (claims read, not verified). */
export async function explainIdentity(a: ExplainArgs): Promise<MatchIdentity> {
  if (a.token) {
    if (a.dn) throw new ExplainUsageError("explain: --dn and --token are two different identities; give one");
    const raw = (await readFile(a.token, "utf8")).trim();
    const part = raw.split(".")[1];
    let claims: Record<string, unknown>;
    try {
      claims = JSON.parse(Buffer.from(part ?? "", "base64url").toString("utf8")) as Record<string, unknown>;
    } catch {
      throw new ExplainUsageError(`explain: ${a.token} holds no JWT (header.payload.signature)`);
    }
    const iss = typeof claims.iss === "string" ? claims.iss : "";
    const sub = typeof claims.sub === "string" ? claims.sub : "";
    if (!iss || !sub) throw new ExplainUsageError(`explain: the token in ${a.token} has no iss or sub claim`);
    const groups = Array.isArray(claims["wlcg.groups"])
      ? (claims["wlcg.groups"] as unknown[]).filter((g): g is string => typeof g === "string")
      : [];
    const scope = typeof claims.scope === "string" ? claims.scope.split(" ").filter(Boolean) : [];
    const base = jobIdentity(tokenOwner(iss, sub), groups);
    return { ...base, kind: "token", issuer: iss, scopes: new Set(scope) };
  }
  if (!a.dn) throw new ExplainUsageError("explain: --dn DN or --token FILE is required");
  const fqans = (a.fqan ?? []).map(shortFqan);
  return { ...jobIdentity(a.dn, fqans), kind: "x509" };
}

export async function explain(
  config: CompiledConfig,
  redis: Redis,
  ops: Pick<AdminOps, "drainStatus">,
  a: ExplainArgs,
  opts: { mapper?: Mapper | undefined } = {},
): Promise<Explanation> {
  if (!a.file) throw new ExplainUsageError("explain: a DESCRIPTION_FILE is required");
  const id = await explainIdentity(a);
  const body = await readFile(a.file, "utf8");
  const settled = parseDescriptionsSettled(body, {
    maxBytes: config.gateway.limits.descriptionBytes,
    maxRerun: config.jobs.maxRerun,
    localInputPrefixes: config.staging.localInputPrefixes,
    limits: { maxDescriptions: config.gateway.limits.jobsPerSubmission },
  });
  const store = new JobStore(redis, config.redis.prefix);

  // What refuses the identity or the request as a whole, whatever the description.
  const common: Step[] = [];
  const access = accessDecision(config, id);
  common.push({ step: "access", ok: access.ok, rule: access.rule, detail: access.ok ? `admitted by ${access.rule}` : access.reason });
  const drain = await ops.drainStatus();
  common.push({
    step: "drain",
    ok: !drain.draining,
    rule: "ceadm drain",
    detail: drain.draining ? "CE is draining: new jobs are not accepted (503)" : "not draining",
  });
  const headroom = await store.headroom(config.jobs.maxTotal);
  common.push({
    step: "ce-limit",
    ok: headroom > 0,
    rule: "jobs.maxTotal",
    detail: `${config.jobs.maxTotal - headroom} of ${config.jobs.maxTotal} jobs held${headroom > 0 ? "" : ": No more jobs allowed (503)"}`,
  });
  const mine = await store.heldBy(id.subject);
  common.push({
    step: "owner-quota",
    ok: mine < config.quotas.jobsPerOwner,
    rule: "quotas.jobsPerOwner",
    detail: `${mine} of ${config.quotas.jobsPerOwner} jobs of this owner${mine < config.quotas.jobsPerOwner ? "" : ": the per-owner quota is reached (403)"}`,
  });
  common.push(await mappingStep(config, redis, id, opts.mapper));

  const policy = destinationPolicy(config);
  const jobs = await Promise.all(
    settled.map(async (it, index) => {
      const steps: Step[] = [...common];
      if (!it.ok) {
        steps.push({ step: "description", ok: false, rule: "description syntax and limits", detail: it.error.message });
        return { index, accepted: false, steps };
      }
      const d = it.description;
      steps.push({ step: "description", ok: true, detail: `${d.language}: executable ${d.executable ?? "(none)"}` });
      const q = queueDecision(config, id, d, a.queue);
      steps.push({ step: "queue", ok: q.ok, rule: q.rule, detail: q.ok ? `queue ${q.queue}` : `${q.reason} (${q.status})` });
      if (q.ok) steps.push(batchStep(config, id, d, q.queue));
      steps.push({
        step: "runtime-environments",
        ok: true,
        detail: d.runtimeEnvironments.length
          ? `requested ${d.runtimeEnvironments.map((r) => (r.version ? `${r.name}-${r.version}` : r.name)).join(", ")}; defaults ${config.jobs.defaultRuntimeEnvironments.join(", ") || "none"}`
          : `none requested; defaults ${config.jobs.defaultRuntimeEnvironments.join(", ") || "none"}`,
      });
      steps.push(...(await stagingSteps(policy, d)));
      return { index, name: d.jobName as string | undefined, accepted: steps.every((s) => s.ok), steps };
    }),
  );
  return {
    identity: { subject: id.subject, kind: id.kind, fqans: [...(id.fqans ?? [])], vos: [...(id.vos ?? [])] },
    accepted: jobs.length > 0 && jobs.every((j) => j.accepted),
    jobs,
  };
}

async function mappingStep(config: CompiledConfig, redis: Redis, id: MatchIdentity, given?: Mapper): Promise<Step> {
  if (!config.mapping)
    return { step: "mapping", ok: true, rule: "mapping (off)", detail: "mapping is off: jobs run as the CE's own account" };
  let mapper = given;
  try {
    mapper ??= await Mapper.create(config.mapping, { redis, prefix: config.redis.prefix });
  } catch (e) {
    if (e instanceof MappingConfigError) return { step: "mapping", ok: false, rule: "mapping", detail: e.message };
    throw e;
  }
  try {
    const u = await mapper.map(id, { dryRun: true });
    return {
      step: "mapping",
      ok: true,
      rule: u.rule,
      detail: `account ${u.account} (uid ${u.uid}, gid ${u.gid})${u.pool ? `, leased from pool ${u.pool} (not taken: dry run)` : ""}`,
    };
  } catch (e) {
    if (e instanceof MappingRefused) return { step: "mapping", ok: false, rule: e.code, detail: `${e.message} (${e.status})` };
    throw e;
  }
}

// The port each scheme connects to when the URL names none (as the stager's protocols do).
const DEFAULT_PORTS: Record<string, number> = { "http:": 80, "dav:": 80, "https:": 443, "davs:": 443, "root:": 1094, "roots:": 1094 };

/**
 * Each staging URL the destination policy (staging.allowNetworks, the CE's own listeners) would
 * refuse, with the stager's own reason: the JEM's DestinationPolicy resolves the host as staging
 * would. URLs of other schemes (file:, rucio:, …) are left to their protocols at run time.
 */
async function stagingSteps(policy: ReturnType<typeof destinationPolicy>, d: JobDescription): Promise<Step[]> {
  const urls = [
    ...d.inputFiles.filter((f) => f.source).map((f) => ({ what: `input ${f.name}`, url: f.source! })),
    ...d.outputFiles.filter((f) => f.target).map((f) => ({ what: `output ${f.name}`, url: f.target! })),
  ];
  const steps: Step[] = [];
  for (const { what, url } of urls) {
    let u: URL;
    try {
      u = new URL(url);
    } catch {
      continue; // the description parser has refused unusable URLs already
    }
    const port = Number(u.port) || DEFAULT_PORTS[u.protocol];
    if (!port || !u.hostname) continue;
    try {
      await policy.resolve(u.hostname, port);
      steps.push({ step: "staging", ok: true, detail: `${what}: ${u.protocol}//${u.host} allowed` });
    } catch (e) {
      if (!(e instanceof DestinationRefused)) {
        steps.push({
          step: "staging",
          ok: false,
          rule: "DNS",
          detail: `${what}: ${u.hostname} does not resolve (${(e as Error).message})`,
        });
        continue;
      }
      steps.push({ step: "staging", ok: false, rule: "staging.allowNetworks", detail: `${what}: ${e.reason}` });
    }
  }
  return steps;
}

/** Where the batch system would put the job: Slurm partition, account, QOS (lrms.slurm.placement), or the Grid Engine queue. */
function batchStep(config: CompiledConfig, id: MatchIdentity, d: JobDescription, queueName: string): Step {
  const queue = config.jobs.queues.find((q) => q.name === queueName)!;
  const partition = queue.partition ?? queueName;
  const backend = config.lrms.backend;
  if (backend === "slurm") {
    const p = placementFor(config, id.subject, id.fqans);
    const account = p?.account ?? d.projectName ?? null;
    return {
      step: "batch",
      ok: true,
      rule: p ? `lrms.slurm.placement[${p.rule}]` : "no placement rule matches",
      detail: `Slurm partition ${p?.partition ?? partition}, account ${account ?? "(Slurm's default)"}, QOS ${p?.qos ?? "(Slurm's default)"}${p?.directives.length ? `, directives ${p.directives.join(" ")}` : ""}`,
    };
  }
  if (backend === "sge") return { step: "batch", ok: true, detail: `Grid Engine queue ${partition}` };
  return { step: "batch", ok: true, detail: `back end ${backend}` };
}

export function renderExplanation(e: Explanation): string {
  const lines = [`identity ${e.identity.subject} (${e.identity.kind}${e.identity.fqans.length ? `, ${e.identity.fqans.join(" ")}` : ""})`];
  for (const j of e.jobs) {
    lines.push(`job ${j.index + 1}${j.name ? ` "${j.name}"` : ""}: ${j.accepted ? "ACCEPTED" : "REFUSED"}`);
    for (const s of j.steps)
      lines.push(`  ${s.ok ? "ok     " : "REFUSED"} ${s.step.padEnd(20)} ${s.detail}${s.rule ? `  [${s.rule}]` : ""}`);
  }
  lines.push(e.accepted ? "the CE would accept this submission" : "the CE would refuse this submission");
  return lines.join("\n");
}
