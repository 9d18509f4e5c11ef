import { Failure } from "@ce/model";
/** A submission the mapping refuses: `status` 403 (no mapping, bad target) or 503 (pool exhausted). */
export class MappingRefused extends Failure<"NO_MAPPING" | "POOL_EXHAUSTED" | "BAD_MAPPING_TARGET"> {
  constructor(
    readonly status: 403 | 503,
    code: "NO_MAPPING" | "POOL_EXHAUSTED" | "BAD_MAPPING_TARGET",
    message: string,
  ) {
    super(code, message);
  }
}

/** The mapping configuration cannot work (bad rule, bad account, unreadable grid-mapfile): stops the boot. */
export class MappingConfigError extends Failure<"MAPPING_INVALID"> {
  constructor(readonly problems: readonly string[]) {
    super("MAPPING_INVALID", `invalid mapping settings:\n  ${problems.join("\n  ")}`);
  }
}
