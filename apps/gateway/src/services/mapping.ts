import { MappingRefused } from "@ce/mapping";
import type { LocalUser } from "@ce/model";
import type { Identity, Services } from "../context.js";
import { Forbidden, ServiceUnavailable } from "../errors.js";

/**
 * The local account of one submission (identity mapping, decided once per request). A refusal
 * is the whole request's answer: 403 naming the reason (no rule, forbidden target) or 503 when
 * the matching pool has no free account. No `mapping` section: undefined (mapping off).
 */
export async function mapLocalUser(s: Services, identity: Identity): Promise<LocalUser | undefined> {
  if (!s.mapper) return undefined;
  try {
    return await s.mapper.map(identity);
  } catch (e) {
    if (!(e instanceof MappingRefused)) throw e;
    throw e.status === 503 ? new ServiceUnavailable(e.message, e.code) : new Forbidden(e.message, e.code);
  }
}
