/** A submission the mapping refuses: `status` 403 (no mapping, bad target) or 503 (pool exhausted). */
export class MappingRefused extends Error {
  constructor(
    readonly status: 403 | 503,
    readonly code: "NO_MAPPING" | "POOL_EXHAUSTED" | "BAD_MAPPING_TARGET",
    message: string,
  ) {
    super(message);
    this.name = "MappingRefused";
    Object.setPrototypeOf(this, new.target.prototype);
  }
}

/** The mapping configuration cannot work (bad rule, bad account, unreadable grid-mapfile): stops the boot. */
export class MappingConfigError extends Error {
  readonly code = "MAPPING_INVALID";
  constructor(readonly problems: readonly string[]) {
    super(`invalid mapping settings:\n  ${problems.join("\n  ")}`);
    this.name = "MappingConfigError";
    Object.setPrototypeOf(this, new.target.prototype);
  }
}
