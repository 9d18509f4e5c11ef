/**
 * A ComputingActivity straight to XML or JSON text, without the element tree: the `info` bulk
 * action renders 100 of them per request, and building the tree, then walking it (and, for JSON,
 * an object per element for JSON.stringify) cost more than the text itself. Byte-identical to
 * `renderXml(buildActivityDocument(input))` placed under a namespace-less parent, and to
 * `JSON.stringify(renderJsonValue(buildActivityDocument(input)))` (activity-text.test.ts checks
 * both): the children come from the same walk (walkActivity).
 */
import { type ActivityInput, type ActivitySink, activityAttrs, walkActivity } from "./activity.js";
import { GLUE2_NS } from "./glue.js";
import { escapeXmlAttr, escapeXmlText } from "./render/xml.js";

class XmlSink implements ActivitySink {
  out = "";
  el(name: string, text: string): void {
    this.out += text === "" ? `<${name}/>` : `<${name}>${escapeXmlText(text)}</${name}>`;
  }
  associations(endpointId: string | undefined, shareId: string | undefined): void {
    if (!endpointId && !shareId) return;
    this.out += "<Associations>";
    if (endpointId) this.el("ComputingEndpointID", endpointId);
    if (shareId) this.el("ComputingShareID", shareId);
    this.out += "</Associations>";
  }
}

const XMLNS = ` xmlns="${escapeXmlAttr(GLUE2_NS)}"`;

/** The `<ComputingActivity xmlns=…>…</ComputingActivity>` element, as renderXml writes it. */
export function activityXml(input: ActivityInput): string {
  const sink = new XmlSink();
  walkActivity(input, sink);
  const a = activityAttrs(input);
  // Never self-closing: the walk always gives ID, OtherInfo, Type, IDFromEndpoint and a State.
  return `<ComputingActivity${XMLNS} BaseType="${escapeXmlAttr(a.BaseType)}" CreationTime="${escapeXmlAttr(a.CreationTime)}" Validity="${escapeXmlAttr(a.Validity)}">${sink.out}</ComputingActivity>`;
}

// Printable ASCII without `"` and `\`: JSON.stringify would only add the quotes.
const JSON_PLAIN = /^[\x20\x21\x23-\x5b\x5d-\x7e]*$/;

/** JSON.stringify of a string, without the call for the common plain text. */
export function jsonString(s: string): string {
  return JSON_PLAIN.test(s) ? `"${s}"` : JSON.stringify(s);
}

/**
 * renderJsonValue's object: one key per name in order of first appearance, a name given more than
 * once an array. The walk gives each name in one run, so a run is one key; the run's values are
 * held until the next name says whether it was one value or an array.
 */
class JsonSink implements ActivitySink {
  out = "{";
  private run = "";
  private values = "";
  private count = 0;
  el(name: string, text: string): void {
    if (name !== this.run) {
      this.flush();
      this.run = name;
    }
    this.values += (this.count++ === 0 ? "" : ",") + jsonString(text);
  }
  flush(): void {
    if (this.count === 0) return;
    this.out += `${this.out.length > 1 ? "," : ""}"${this.run}":${this.count > 1 ? `[${this.values}]` : this.values}`;
    this.values = "";
    this.count = 0;
  }
  associations(endpointId: string | undefined, shareId: string | undefined): void {
    this.flush();
    if (!endpointId && !shareId) return;
    let a = "";
    if (endpointId) a += `"ComputingEndpointID":${jsonString(endpointId)}`;
    if (shareId) a += `${a ? "," : ""}"ComputingShareID":${jsonString(shareId)}`;
    this.out += `${this.out.length > 1 ? "," : ""}"Associations":{${a}}`;
  }
}

/** The ComputingActivity's JSON value (an object: children, then `_attributes`), as renderJson writes it. */
export function activityJson(input: ActivityInput): string {
  const sink = new JsonSink();
  walkActivity(input, sink);
  sink.flush();
  const a = activityAttrs(input);
  return `${sink.out},"_attributes":{"BaseType":${jsonString(a.BaseType)},"CreationTime":${jsonString(a.CreationTime)},"Validity":${jsonString(a.Validity)}}}`;
}
