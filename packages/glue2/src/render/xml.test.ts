import { describe, expect, it } from "vitest";
import { XMLParser } from "fast-xml-parser";
import { el } from "../tree.js";
import { escapeXmlAttr, escapeXmlText, renderXml } from "./xml.js";

describe("renderXml", () => {
  it("renders compactly without declaration by default", () => {
    const doc = el("jobs", [el("job", [el("status-code", "201"), el("reason", "Created")])]);
    expect(renderXml(doc)).toBe("<jobs><job><status-code>201</status-code><reason>Created</reason></job></jobs>");
    expect(renderXml(doc, { declaration: true })).toMatch(/^<\?xml version="1.0" encoding="utf-8"\?><jobs>/);
  });

  it("self-closes empty elements", () => {
    expect(renderXml(el("jobs"))).toBe("<jobs/>");
    expect(renderXml(el("a", [el("info_document")]))).toBe("<a><info_document/></a>");
  });

  it("escapes text and attributes", () => {
    const doc = el("a", 'x < y & z > "q"', { v: `a"b<c>&d\te\nf` });
    expect(renderXml(doc)).toBe(`<a v="a&quot;b&lt;c&gt;&amp;d&#9;e&#10;f">x &lt; y &amp; z &gt; "q"</a>`);
    const back = new XMLParser({ ignoreAttributes: false, attributeNamePrefix: "@" }).parse(renderXml(doc));
    expect(back.a["#text"]).toBe('x < y & z > "q"');
  });

  it("keeps UTF-8 and replaces characters XML cannot carry", () => {
    expect(escapeXmlText("é 日本 😀")).toBe("é 日本 😀");
    expect(escapeXmlText("a\u0000b\u001bc")).toBe("a\uFFFDb\uFFFDc");
    expect(escapeXmlAttr("x\uD800y")).toBe("x\uFFFDy");
  });

  it("emits xmlns where the namespace first appears or changes, inherited below", () => {
    const doc = el("InfoRoot", [{ ...el("Domains", [el("AdminDomain", [el("ID", "x")])]), ns: "urn:g" }, el("Other")]);
    expect(renderXml(doc)).toBe('<InfoRoot><Domains xmlns="urn:g"><AdminDomain><ID>x</ID></AdminDomain></Domains><Other/></InfoRoot>');
    const nested = { ...el("a", [{ ...el("b", [el("c")]), ns: "urn:g" }]), ns: "urn:g" };
    expect(renderXml(nested)).toBe('<a xmlns="urn:g"><b><c/></b></a>');
    const change = {
      ...el("a", [
        { ...el("b"), ns: "urn:h" },
        { ...el("c"), ns: "" },
      ]),
      ns: "urn:g",
    };
    expect(renderXml(change)).toBe('<a xmlns="urn:g"><b xmlns="urn:h"/><c xmlns=""/></a>');
  });

  it("ignores a literal xmlns attribute (namespace lives in ns) but keeps prefixed declarations", () => {
    const doc = { ...el("a", undefined, { xmlns: "urn:x", "xmlns:xsi": "urn:xsi" }), ns: "urn:g" };
    expect(renderXml(doc)).toBe('<a xmlns="urn:g" xmlns:xsi="urn:xsi"/>');
  });

  it("refuses invalid element names rather than emitting broken XML", () => {
    expect(() => renderXml(el("a b"))).toThrow(/invalid XML name/);
    expect(() => renderXml(el("<x>"))).toThrow(/invalid XML name/);
  });
});
