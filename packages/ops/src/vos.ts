import type { CompiledConfig } from "@ce/config";

/** The most VOs that get their own metric label value; a site naming more gets the rest as `other`. */
export const MAX_VO_LABELS = 50;

/**
 * The VOs a site names in its configuration (`vo:<name>` and `fqan:/<name>/…` rules of
 * `auth.allow`, the queues' `allow` and the mapping rules): the label values of per-VO metrics.
 * Taken from configuration, never from jobs, so a user cannot add series.
 */
export function configuredVos(config: {
  auth: Pick<CompiledConfig["auth"], "allow">;
  jobs: { queues: readonly { allow?: readonly string[] | undefined }[] };
  mapping?: { rules: readonly { match: string | readonly string[] }[] } | undefined;
}): string[] {
  const rules = [
    ...config.auth.allow,
    ...config.jobs.queues.flatMap((q) => q.allow ?? []),
    ...(config.mapping?.rules ?? []).flatMap((r) => (typeof r.match === "string" ? [r.match] : r.match)),
  ];
  const vos = rules
    .map((r) => /^vo:([^*?/]+)$/.exec(r)?.[1] ?? /^fqan:\/([^/*?]+)/.exec(r)?.[1])
    .filter((v): v is string => !!v && v !== "other" && v !== "none");
  return [...new Set(vos)].sort().slice(0, MAX_VO_LABELS);
}
