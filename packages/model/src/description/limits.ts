/**
 * Every cap on what a job description may grow to, in one place. The readers enforce them WHILE
 * parsing and evaluating (before the memory is spent), so a small body cannot make the gateway
 * build a huge tree or string (`rsl_substitution` doubling chains, `+` bundles of thousands of
 * jobs, deep nesting). Exceeding one raises `DescriptionLimitError` (code LIMIT_EXCEEDED) whose
 * message names the cap and its value. Sizes are counted in characters (≈ bytes for ASCII text).
 */
import { DescriptionLimitError, type SourcePosition } from "../errors.js";

export interface DescriptionLimits {
  /** Descriptions in one body (`+` multi-xRSL, ADL ActivityDescriptions). */
  maxDescriptions: number;
  /** Nesting of RSL groups and value lists, and of XML elements. */
  maxDepth: number;
  /** Syntax nodes in one body: RSL relations and values, XML elements. */
  maxNodes: number;
  /** Items in one list: values of one RSL relation or `( )` list, relations of one group, children of one XML element. */
  maxListItems: number;
  /** `rsl_substitution` variables defined in one description. */
  maxVariables: number;
  /** Variables defined through variables defined through …: the longest such chain. */
  maxSubstitutionDepth: number;
  /** One evaluated string value (after substitution), one XML text or attribute value. */
  maxValueChars: number;
  /** All evaluated values of one description together. */
  maxExpandedChars: number;
  /** All evaluated values of every description of one body together. */
  maxTotalExpandedChars: number;
}

const KIB = 1024;
const MIB = 1024 * KIB;

/**
 * Far above any real job (a few dozen relations, a few KB), far below what hurts a gateway: an
 * accepted description is copied several times on its way to the control files, so the body
 * budget is what one request can cost. One value is capped like one Linux argument
 * (MAX_ARG_STRLEN, 128 KiB): longer could not be passed to the job anyway.
 */
export const DESCRIPTION_LIMITS: Readonly<DescriptionLimits> = Object.freeze({
  maxDescriptions: 1000,
  maxDepth: 64,
  maxNodes: 200_000,
  maxListItems: 10_000,
  maxVariables: 1000,
  maxSubstitutionDepth: 32,
  maxValueChars: 128 * KIB,
  maxExpandedChars: 1 * MIB,
  maxTotalExpandedChars: 8 * MIB,
});

export function resolveLimits(overrides?: Partial<DescriptionLimits>): DescriptionLimits {
  const out: DescriptionLimits = { ...DESCRIPTION_LIMITS };
  for (const [k, v] of Object.entries(overrides ?? {})) {
    if (typeof v === "number" && Number.isFinite(v) && v > 0) out[k as keyof DescriptionLimits] = Math.floor(v);
  }
  return out;
}

/** Caps that concern the whole body: exceeding them refuses the request (413), not one job. */
const BODY_LIMITS: ReadonlySet<string> = new Set(["maxDescriptions", "maxNodes"]);

export function isBodyLimit(e: unknown): e is DescriptionLimitError {
  return e instanceof DescriptionLimitError && BODY_LIMITS.has(e.limit);
}

export function limitError(limit: keyof DescriptionLimits, max: number, detail: string, position?: SourcePosition): DescriptionLimitError {
  return new DescriptionLimitError(limit, max, detail, position);
}

/**
 * Characters produced while evaluating: one budget per description, sharing one per body. Charged
 * BEFORE a string is built, so the check is what bounds memory.
 */
export class ExpansionBudget {
  private used = 0;
  constructor(
    readonly limits: DescriptionLimits,
    private readonly body?: ExpansionBudget,
  ) {}

  /** A budget for one description of this body. */
  child(): ExpansionBudget {
    return new ExpansionBudget(this.limits, this);
  }

  /** `at` gives the position for the error message (computed only when a cap is hit). */
  charge(chars: number, what: string, at?: () => SourcePosition): void {
    const { maxValueChars, maxExpandedChars, maxTotalExpandedChars } = this.limits;
    if (chars > maxValueChars) throw limitError("maxValueChars", maxValueChars, `${what} would be ${chars} characters long`, at?.());
    this.used += chars;
    if (this.body) {
      if (this.used > maxExpandedChars) {
        throw limitError(
          "maxExpandedChars",
          maxExpandedChars,
          `the values of this description expand to more than ${maxExpandedChars} characters (at ${what})`,
          at?.(),
        );
      }
      this.body.charge(chars, what, at);
    } else if (this.used > maxTotalExpandedChars) {
      throw limitError(
        "maxTotalExpandedChars",
        maxTotalExpandedChars,
        `the descriptions of this request expand to more than ${maxTotalExpandedChars} characters`,
        at?.(),
      );
    }
  }
}
