/**
 * Safe XML reading for ADL: size limit, no DOCTYPE/entities, well-formedness via fast-xml-parser,
 * and a namespace-prefix–agnostic element tree that remembers each element's character span
 * (so a description can be stored as the exact text the client sent).
 */
import { XMLParser, XMLValidator } from "fast-xml-parser";
import { AdlSyntaxError, DescriptionTooLargeError, positionAt } from "../../errors.js";
import { DESCRIPTION_LIMITS, limitError, type DescriptionLimits } from "../limits.js";

export const DEFAULT_MAX_DESCRIPTION_BYTES = 5 * 1024 * 1024;
/** ADL is a few levels deep; much deeper nesting is an attack on the (recursive) tree builder. */
export const MAX_XML_DEPTH = DESCRIPTION_LIMITS.maxDepth;

export interface XNode {
  /** Qualified name as written, e.g. `adl:Name`. */
  qname: string;
  /** Name without prefix, e.g. `Name`: elements are matched by this only. */
  local: string;
  /** Attribute values, entity references decoded; keys as written (`xmlns:adl`, `useNumberOfSlots`). */
  attrs: Record<string, string>;
  children: XNode[];
  /** Direct text content (including CDATA), entity references decoded, not trimmed. */
  text: string;
  start: number;
  end: number;
  innerStart: number;
  innerEnd: number;
}

interface Span {
  qname: string;
  start: number;
  end: number;
  innerStart: number;
  innerEnd: number;
  children: Span[];
}

type FxpNode = Record<string, unknown>;

const PARSER = new XMLParser({
  preserveOrder: true,
  ignoreAttributes: false,
  attributeNamePrefix: "",
  // Never expand entities (billion-laughs / external entities); predefined ones are decoded below.
  processEntities: false,
  htmlEntities: false,
  parseTagValue: false,
  parseAttributeValue: false,
  trimValues: false,
  ignoreDeclaration: true,
  ignorePiTags: true,
  cdataPropName: "#cdata",
  // Backstop only: readXml refuses deeper documents (limits.maxDepth) before fast-xml-parser runs.
  maxNestedTags: 256,
});

/** Checks size and forbidden constructs, then parses. Throws AdlSyntaxError / DescriptionTooLargeError. */
export function readXml(
  text: string,
  maxBytes: number = DEFAULT_MAX_DESCRIPTION_BYTES,
  limits: DescriptionLimits = DESCRIPTION_LIMITS,
): XNode {
  const size = Buffer.byteLength(text, "utf8");
  if (size > maxBytes) throw new DescriptionTooLargeError(size, maxBytes);
  for (const forbidden of [/<!DOCTYPE/i, /<!ENTITY/i]) {
    const m = forbidden.exec(text);
    if (m) {
      throw new AdlSyntaxError(
        `${m[0].slice(2).toUpperCase()} declarations are not allowed in job descriptions`,
        positionAt(text, m.index),
      );
    }
  }
  // Depth and counts are checked while scanning, before fast-xml-parser builds anything.
  const spans = scanSpans(text, limits);
  const valid = XMLValidator.validate(text);
  if (valid !== true) {
    const { msg, line, col } = valid.err;
    // fast-xml-parser leaves line/col undefined for some errors (`<?>`): then point at the start.
    throw new AdlSyntaxError(msg.replace(/\.$/, ""), positionAt(text, offsetOf(text, line || 1, col || 1)));
  }
  let parsed: FxpNode[];
  try {
    parsed = PARSER.parse(text) as FxpNode[];
  } catch (e) {
    // The validator lets a few broken documents through (`<a/` at the end); the parser then throws.
    throw new AdlSyntaxError(`the document is not well-formed XML (${e instanceof Error ? e.message.slice(0, 200) : "unreadable"})`);
  }
  const elements = parsed.filter(isElement);
  if (elements.length !== 1 || spans.length !== 1) throw new AdlSyntaxError("the document must have exactly one root element");
  return build(elements[0] as FxpNode, spans[0] as Span, limits.maxValueChars, text);
}

function isElement(n: FxpNode): boolean {
  return elementName(n) !== undefined;
}

function elementName(n: FxpNode): string | undefined {
  return Object.keys(n).find((k) => k !== ":@" && k !== "#text" && k !== "#cdata");
}

function build(n: FxpNode, span: Span, maxValue: number, source: string): XNode {
  const qname = elementName(n) as string;
  if (qname !== span.qname) throw new AdlSyntaxError(`internal mismatch reading element <${qname}>`);
  const rawAttrs = (n[":@"] ?? {}) as Record<string, unknown>;
  const attrs: Record<string, string> = {};
  const tooLong = (what: string) => {
    throw limitError(
      "maxValueChars",
      maxValue,
      `${what} of <${qname}> is longer than ${maxValue} characters`,
      positionAt(source, span.start),
    );
  };
  for (const [k, v] of Object.entries(rawAttrs)) {
    const value = String(v);
    if (value.length > maxValue) tooLong(`attribute ${k.slice(0, 64)}`);
    attrs[k] = decodeEntities(value);
  }
  const content = (n[qname] ?? []) as FxpNode[];
  const children: XNode[] = [];
  let text = "";
  let spanIndex = 0;
  for (const c of content) {
    if ("#text" in c) text += decodeEntities(String(c["#text"]));
    else if ("#cdata" in c) text += ((c["#cdata"] ?? []) as FxpNode[]).map((t) => String(t["#text"] ?? "")).join("");
    else if (isElement(c)) {
      const childSpan = span.children[spanIndex++];
      if (!childSpan) throw new AdlSyntaxError(`internal mismatch reading children of <${qname}>`);
      children.push(build(c, childSpan, maxValue, source));
    }
    if (text.length > maxValue) tooLong("the text");
  }
  const colon = qname.indexOf(":");
  return {
    qname,
    local: colon >= 0 ? qname.slice(colon + 1) : qname,
    attrs,
    children,
    text,
    start: span.start,
    end: span.end,
    innerStart: span.innerStart,
    innerEnd: span.innerEnd,
  };
}

const PREDEFINED: Record<string, string> = { lt: "<", gt: ">", amp: "&", quot: '"', apos: "'" };

/** Decodes the five predefined entities and character references; nothing else is expanded. */
export function decodeEntities(s: string): string {
  if (!s.includes("&")) return s;
  return s.replace(/&(#x[0-9a-fA-F]+|#[0-9]+|[a-zA-Z]+);/g, (all, ref: string) => {
    if (ref.startsWith("#")) {
      const cp = ref[1] === "x" || ref[1] === "X" ? parseInt(ref.slice(2), 16) : parseInt(ref.slice(1), 10);
      return cp > 0 && cp <= 0x10ffff ? String.fromCodePoint(cp) : all;
    }
    return PREDEFINED[ref] ?? all;
  });
}

function offsetOf(text: string, line: number, col: number): number {
  let offset = 0;
  for (let l = 1; l < line; l++) {
    const nl = text.indexOf("\n", offset);
    if (nl < 0) return text.length;
    offset = nl + 1;
  }
  return Math.min(text.length, offset + Math.max(0, col - 1));
}

/**
 * Element spans (comments, CDATA, PIs and quotes skipped). Iterative, and refuses too deep, too
 * many or too wide element trees as it goes: the point is to stop before anything recurses.
 */
function scanSpans(text: string, limits: DescriptionLimits): Span[] {
  const roots: Span[] = [];
  const stack: Span[] = [];
  let i = 0;
  let count = 0;
  const skipTo = (marker: string, from: number): number => {
    const at = text.indexOf(marker, from);
    return at < 0 ? text.length : at + marker.length;
  };
  while (i < text.length) {
    const lt = text.indexOf("<", i);
    if (lt < 0) break;
    if (text.startsWith("<!--", lt)) i = skipTo("-->", lt + 4);
    else if (text.startsWith("<![CDATA[", lt)) i = skipTo("]]>", lt + 9);
    else if (text.startsWith("<?", lt)) i = skipTo("?>", lt + 2);
    else if (text.startsWith("<!", lt)) i = skipTo(">", lt + 2);
    else if (text.startsWith("</", lt)) {
      const gt = skipTo(">", lt);
      const node = stack.pop();
      if (node) {
        node.innerEnd = lt;
        node.end = gt;
      }
      i = gt;
    } else {
      let j = lt + 1;
      let quote: string | undefined;
      for (; j < text.length; j++) {
        const c = text[j];
        // `<` is never allowed inside a tag (not even in a quoted value): refusing it here keeps
        // fast-xml-parser's validator from slow rescans of tags that never end.
        if (c === "<") throw new AdlSyntaxError("'<' inside a tag: a tag is not closed with '>'", positionAt(text, j));
        if (quote) {
          if (c === quote) quote = undefined;
        } else if (c === '"' || c === "'") quote = c;
        else if (c === ">") break;
      }
      // An unterminated tag runs to the end: stop, rather than rescan the rest for every `<`.
      if (j >= text.length) break;
      const qname = /^[^\s/>]+/.exec(text.slice(lt + 1, lt + 200))?.[0] ?? "";
      const node: Span = { qname, start: lt, end: j + 1, innerStart: j + 1, innerEnd: j + 1, children: [] };
      const siblings = stack[stack.length - 1]?.children ?? roots;
      const at = () => positionAt(text, lt);
      if (++count > limits.maxNodes)
        throw limitError("maxNodes", limits.maxNodes, `more than ${limits.maxNodes} XML elements in one request`, at());
      if (stack.length >= limits.maxDepth)
        throw limitError("maxDepth", limits.maxDepth, `elements are nested more than ${limits.maxDepth} levels deep`, at());
      if (siblings.length >= limits.maxListItems) {
        throw limitError("maxListItems", limits.maxListItems, `more than ${limits.maxListItems} child elements in one element`, at());
      }
      siblings.push(node);
      if (text[j - 1] !== "/") stack.push(node);
      i = j + 1;
    }
  }
  return roots;
}

/** Child elements with the given local name (namespace prefix ignored). */
export function children(node: XNode, local: string): XNode[] {
  return node.children.filter((c) => c.local === local);
}

export function child(node: XNode, local: string): XNode | undefined {
  return node.children.find((c) => c.local === local);
}
