export { type El, type Child, type Scalar, type AttrValue, el, leaf, leaves, intLeaf, withNs, localName, sanitizeChars } from "./tree.js";
export { type XmlOptions, renderXml, escapeXmlText, escapeXmlAttr } from "./render/xml.js";
export { type JsonOptions, type JsonValue, renderJson, renderJsonValue } from "./render/json.js";
export { type HtmlOptions, renderHtml, escapeHtml } from "./render/html.js";
export { type Format, type RenderOptions, negotiateFormat, contentTypeFor, render } from "./negotiate.js";
export {
  FORCE_ARRAYS,
  forceArraysFor,
  STATE_NONE,
  type JobListItem,
  type BulkItem,
  type DelegationListItem,
  type SessionListing,
  versionsDoc,
  jobListDoc,
  bulkResultsDoc,
  delegationListDoc,
  sessionListingDoc,
  errorDoc,
} from "./documents.js";
export { GLUE2_NS, ARCREST_INTERFACE, glueTime, glueTimeOpt, glueIds, splitRteName, voShareName, publishedEndpointUrl } from "./glue.js";
export {
  type InfoInput,
  type QueueInput,
  type VoShareInput,
  type JobCounts,
  type HealthState,
  type ServingState,
  type ExecutionEnvironmentInput,
  ARCREST_CAPABILITIES,
  REST_INTERFACE_VERSIONS,
  buildInfoDocument,
} from "./info.js";
export { type ActivityInput, type ActivitySink, buildActivityDocument, walkActivity } from "./activity.js";
export { activityXml, activityJson } from "./activity-text.js";
