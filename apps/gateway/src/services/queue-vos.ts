import type { CompiledConfig, QueueConfig } from "@ce/config";
import { normalVo } from "@ce/store";

/**
 * The VOs a queue admits, for its `<queue>_<vo>` GLUE2 shares: the queue's `vos` when configured
 * (also `[]`: none), else the VOs its `allow` rules name, else those of auth.allow, else those of
 * the mapping rules. The first spelling of a VO is kept; VOs differing only in case are one.
 */
export function queueVos(q: QueueConfig, config: CompiledConfig): string[] {
  if (q.vos) return dedupe(q.vos);
  const mapping = (config.mapping?.rules ?? []).flatMap((r) => (typeof r.match === "string" ? [r.match] : r.match));
  for (const rules of [q.allow, config.auth.allow, mapping]) {
    const vos = vosNamed(rules);
    if (vos.length > 0) return vos;
  }
  return [];
}

/**
 * VOs named by `vo:<vo>`, `fqan:/<vo>…` and `group:/<vo>…` rules (a rule of other kinds names none;
 * a VO part with glob characters is no VO name and is skipped).
 */
export function vosNamed(rules: readonly string[]): string[] {
  const out: string[] = [];
  for (const r of rules) {
    const vo = /^vo:(.+)$/.exec(r)?.[1] ?? /^(?:fqan|group):\/([^/]+)/.exec(r)?.[1];
    if (vo !== undefined && !/[*?]/.test(vo)) out.push(vo);
  }
  return dedupe(out);
}

function dedupe(vos: readonly string[]): string[] {
  const seen = new Set<string>();
  const out: string[] = [];
  for (const v of vos) {
    const key = normalVo(v);
    if (key === undefined || seen.has(key)) continue;
    seen.add(key);
    out.push(v);
  }
  return out;
}
