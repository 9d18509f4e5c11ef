/**
 * A ComputingActivity straight to XML or JSON text, without the element tree: the
 * `info` bulk action renders 100 of them per request, and building the tree, then walking it (and,
 * for JSON, an intermediate object per element) cost more than the output itself. Byte-identical to
 * `renderXml(buildActivityDocument(input))` placed under a namespace-less parent, and to
 * `JSON.stringify(renderJsonValue(buildActivityDocument(input)))` (activity-text.test.ts checks
 * both): the children come from the same walk (walkActivity).
 */
import { type ActivityInput, type ActivitySink, activityAttrs, walkActivity } from "./activity.js";
import { GLUE2_NS } from "./glue.js";
import { escapeXmlAttr, escapeXmlText } from "./render/xml.js";

/** Writes into a parts list, joined once: cheaper than growing (and then flattening) a string rope. */
class XmlSink implements ActivitySink {
  constructor(readonly parts: string[]) {}
  el(name: string, text: string): void {
    this.parts.push(text === "" ? `<${name}/>` : `<${name}>${escapeXmlText(text)}</${name}>`);
  }
  associations(endpointId: string | undefined, shareId: string | undefined): void {
    if (!endpointId && !shareId) return;
    this.parts.push("<Associations>");
    if (endpointId) this.el("ComputingEndpointID", endpointId);
    if (shareId) this.el("ComputingShareID", shareId);
    this.parts.push("</Associations>");
  }
}

const XMLNS = ` xmlns="${escapeXmlAttr(GLUE2_NS)}"`;

/** The `<ComputingActivity xmlns=…>…</ComputingActivity>` element as XML text, as renderXml writes it. */
export function activityXml(input: ActivityInput): string {
  const parts = [""]; // the start tag, once the walk has checked the input
  walkActivity(input, new XmlSink(parts));
  const a = activityAttrs(input);
  // Never self-closing: the walk always gives ID, OtherInfo, Type, IDFromEndpoint and a State.
  parts[0] = `<ComputingActivity${XMLNS} BaseType="${escapeXmlAttr(a.BaseType)}" CreationTime="${escapeXmlAttr(a.CreationTime)}" Validity="${escapeXmlAttr(a.Validity)}">`;
  parts.push("</ComputingActivity>");
  return parts.join("");
}

type ActivityJsonValue = { [key: string]: string | string[] | ActivityJsonValue };

/**
 * renderJsonValue's object: one key per name in order of first appearance, a name given more than
 * once an array (the walk gives each name in one run). Plain objects for one JSON.stringify: its
 * escaping beats a test per string, and its output is one flat string.
 */
class JsonSink implements ActivitySink {
  readonly obj: ActivityJsonValue = {};
  el(name: string, text: string): void {
    const prev = this.obj[name];
    if (prev === undefined) this.obj[name] = text;
    else if (typeof prev === "string") this.obj[name] = [prev, text];
    else (prev as string[]).push(text);
  }
  associations(endpointId: string | undefined, shareId: string | undefined): void {
    if (!endpointId && !shareId) return;
    const a: ActivityJsonValue = {};
    if (endpointId) a.ComputingEndpointID = endpointId;
    if (shareId) a.ComputingShareID = shareId;
    this.obj.Associations = a;
  }
}

/** The ComputingActivity's JSON text (children, then `_attributes`), as renderJson writes it. */
export function activityJson(input: ActivityInput): string {
  const sink = new JsonSink();
  walkActivity(input, sink);
  sink.obj._attributes = activityAttrs(input);
  return JSON.stringify(sink.obj);
}
