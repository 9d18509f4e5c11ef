import { describe, expect, it } from "vitest";
import { contentTypeFor, negotiateFormat, render } from "./negotiate.js";
import { versionsDoc } from "./documents.js";

describe("negotiateFormat", () => {
  it.each([
    ["application/json", "json"],
    ["text/xml", "xml"],
    ["application/xml", "xml"],
    ["*/*", "html"],
    [undefined, "html"],
    ["", "html"],
    ["text/html", "html"],
    ["application/json;q=0.5, text/xml", "json"],
    ["text/xml;q=0.1, application/json", "xml"],
    ["image/png, */*, application/json", "json"],
    ["Application/JSON", "json"],
    ["text/html, application/json", "html"],
  ] as const)("%s → %s", (accept, fmt) => {
    expect(negotiateFormat(accept)).toBe(fmt);
  });

  it("concatenates several header instances in order", () => {
    expect(negotiateFormat(["*/*", "text/xml"])).toBe("xml");
  });

  it("maps formats to content types", () => {
    expect(contentTypeFor("json")).toBe("application/json");
    expect(contentTypeFor("xml")).toBe("application/xml");
    expect(contentTypeFor("html")).toBe("text/html; charset=utf-8");
  });

  it("render() dispatches to the renderer", () => {
    const doc = versionsDoc(["1.0", "1.1"]);
    expect(render(doc, "xml")).toBe("<versions><version>1.0</version><version>1.1</version></versions>");
    expect(render(doc, "json")).toBe('{"version":["1.0","1.1"]}');
    expect(render(doc, "html")).toContain("<!DOCTYPE html>");
  });
});
