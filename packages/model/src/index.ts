export * from "./states.js";
export * from "./transitions.js";
export * from "./errors.js";
export * from "./failure.js";
export * from "./description/types.js";
export { parseDuration, parseTimestamp, splitUrlOptions, type UrlWithOptions } from "./description/values.js";
export { normalizeSessionPath } from "./description/paths.js";
export { checkLocalInput, localSourcePath } from "./description/local.js";
export { validateDescription, type ValidateOptions } from "./description/validate.js";
export {
  parseRsl,
  parseXrsl,
  parseXrslSettled,
  evaluateJob,
  splitJobs,
  normalizeAttributeName,
  type XrslItem,
  type EvaluatedRelation,
  type XValue,
  type RelationOperator,
  type RslNode,
  type RslBoolean,
  type RslRelation,
  type RslValue,
  type RslLiteral,
  type RslVariable,
  type RslConcat,
  type RslSequence,
} from "./description/xrsl/index.js";
export { parseAdl, parseAdlSettled, DEFAULT_MAX_DESCRIPTION_BYTES, type AdlOptions, type AdlItem } from "./description/adl/index.js";
export {
  detectFormat,
  DESCRIPTION_LIMITS,
  isBodyLimit,
  type DescriptionLimits,
  parseDescriptions,
  parseDescriptionsSettled,
  type DescriptionFormat,
  type ParseOptions,
  type SettledDescription,
} from "./description/index.js";
export type { LocalUser } from "./localuser.js";
export { awaitingMessage, awaitingText, clientUploads } from "./uploads.js";
export { legacyTokenOwner, parseTokenOwner, tokenOwner, type LegacyOwner } from "./owner.js";
export { NO_VO, failureWords, stateInWords, secondsInWords, bytesInWords, type FailureWords, type FailureFacts } from "./words.js";
export { LRMS_REASON_MAX, WAITING_LRMS_STATES, lrmsReasonText, shownLrmsReason } from "./lrms-reason.js";
