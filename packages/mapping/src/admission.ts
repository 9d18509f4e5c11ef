import type { CompiledConfig } from "@ce/config";
import type { JobDescription } from "@ce/model";
import { enabledRtesCached } from "@ce/store";
import { type MatchIdentity, ruleMatches } from "./rules.js";

/*
 * The CE's admission decisions that depend only on the configuration, the identity and the
 * description: the site access policy (auth.allow / auth.deny) and a description's queue, GPU and
 * runtime-environment checks. The gateway's submission (apps/gateway services/submit.ts, the
 * identity middleware) and `ceadm explain` both call these, so what explain says is what a
 * submission does. Each decision names the rule that decided.
 */

export type AccessDecision = { ok: true; rule: string } | { ok: false; rule: string; reason: string };

/**
 * Site access policy (the model is arc.conf `allowaccess`/`denyaccess`): deny rules win over
 * allow rules; an empty allow list admits every authenticated identity. A rule that does not
 * parse never matches (so a typo cannot open access).
 */
export function accessDecision(config: Pick<CompiledConfig, "auth">, id: MatchIdentity): AccessDecision {
  const { allow, deny } = config.auth;
  const hit = deny.find((r) => ruleMatches(r, id));
  if (hit) return { ok: false, rule: `auth.deny ${hit}`, reason: `identity ${id.subject} matches deny rule ${hit}` };
  if (allow.length === 0) return { ok: true, rule: "auth.allow is empty: every authenticated identity" };
  const ok = allow.find((r) => ruleMatches(r, id));
  return ok
    ? { ok: true, rule: `auth.allow ${ok}` }
    : { ok: false, rule: "auth.allow", reason: `identity ${id.subject} matches no allow rule` };
}

export type QueueDecision =
  { ok: true; queue: string; rule: string } | { ok: false; queue: string; status: 400 | 403 | 500; rule: string; reason: string };

/** Exact name, `name-version`, or any version of `name` when none was requested. */
export function rteAvailable(r: { name: string; version?: string | undefined }, configured: readonly string[]): boolean {
  const wanted = r.version ? `${r.name}-${r.version}` : r.name;
  return configured.some((c) => c === wanted || (!r.version && c.startsWith(`${r.name}-`) && /^\d/.test(c.slice(r.name.length + 1))));
}

/**
 * The queue a description goes to and whether that queue takes it: the queue exists, its `allow`
 * admits the identity, its GPU cap, and every requested runtime environment is enabled. The
 * status is the per-item answer a submission gives (400 unknown queue, 403 policy, 500 missing RTE).
 */
export function queueDecision(
  config: CompiledConfig,
  id: MatchIdentity,
  d: Pick<JobDescription, "queue" | "gpus" | "runtimeEnvironments">,
  requestQueue?: string,
): QueueDecision {
  const queueName = d.queue ?? requestQueue ?? config.jobs.defaultQueue;
  const queue = config.jobs.queues.find((q) => q.name === queueName);
  const where = `jobs.queues[${queueName}]`;
  if (!queue)
    return {
      ok: false,
      queue: queueName,
      status: 400,
      rule: "jobs.queues",
      reason: `Requested queue ${queueName} does not exist on this CE`,
    };
  let rule = `${where}.allow is empty: everyone the CE admits`;
  if (queue.allow.length > 0) {
    const hit = queue.allow.find((r) => ruleMatches(r, id));
    if (!hit)
      return {
        ok: false,
        queue: queueName,
        status: 403,
        rule: `${where}.allow`,
        reason: `Requested queue ${queueName} is not allowed for this user`,
      };
    rule = `${where}.allow ${hit}`;
  }
  // A valid request this queue's policy refuses (another queue may take it): 403, as a queue not allowed.
  if (d.gpus && queue.maxGpusPerJob !== undefined && d.gpus > queue.maxGpusPerJob) {
    const limit =
      queue.maxGpusPerJob === 0
        ? `queue ${queueName} has no GPUs (maxGpusPerJob 0)`
        : `queue ${queueName} allows at most ${queue.maxGpusPerJob} per job (maxGpusPerJob)`;
    return { ok: false, queue: queueName, status: 403, rule: `${where}.maxGpusPerJob`, reason: `Requested ${d.gpus} GPU(s); ${limit}` };
  }
  const missingRte = d.runtimeEnvironments.find((r) => !rteAvailable(r, enabledRtesCached(config)));
  if (missingRte) {
    const name = missingRte.version ? `${missingRte.name}-${missingRte.version}` : missingRte.name;
    return {
      ok: false,
      queue: queueName,
      status: 500,
      rule: "runtime environments (ceadm rte)",
      reason: `Requested runtime environment ${name} is missing`,
    };
  }
  return { ok: true, queue: queueName, rule };
}
