import { describe, expect, it } from "vitest";
import { el } from "../tree.js";
import { renderHtml, escapeHtml } from "./html.js";
import { jobListDoc, sessionListingDoc } from "../documents.js";

describe("renderHtml", () => {
  it("produces a full HTML5 page with charset, title and styles", () => {
    const html = renderHtml(el("versions", [el("version", "1.0")]));
    expect(html.startsWith("<!DOCTYPE html>")).toBe(true);
    expect(html).toContain('<meta charset="utf-8">');
    expect(html).toContain("<title>versions</title>");
    expect(html).toContain("<style>");
    expect(html).toContain("<tr><th>version</th><td>1.0</td></tr>");
    expect(html.trimEnd().endsWith("</html>")).toBe(true);
    expect(renderHtml(el("x"), { title: "A & B" })).toContain("<title>A &amp; B</title>");
  });

  it("escapes all text and attributes", () => {
    const doc = el("jobs", [el("job", [el("name", "<script>alert('x')</script>")], { a: '"><img src=x onerror=1>' })]);
    const html = renderHtml(doc);
    expect(html).not.toContain("<script>");
    expect(html).not.toContain("<img");
    expect(html).toContain("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;");
    expect(html).toContain("a=&quot;&gt;&lt;img src=x onerror=1&gt;");
    expect(escapeHtml("é")).toBe("é");
  });

  it("nests tables for structure", () => {
    const html = renderHtml(el("r", [el("a", [el("b", "1")])]));
    expect(html).toContain("<table><tr><th>a</th><td><table><tr><th>b</th><td>1</td></tr></table></td></tr></table>");
  });

  it("turns values into links through the hook, with path, text and escaping", () => {
    const seen: string[] = [];
    const html = renderHtml(jobListDoc([{ id: "j1" }, { id: 'j"2' }]), {
      links: (path, text) => {
        seen.push(path.join("/"));
        return path.join("/") === "jobs/job/id" ? `jobs/${encodeURIComponent(text)}/session/` : undefined;
      },
    });
    expect(seen).toEqual(["jobs/job/id", "jobs/job/id"]);
    expect(html).toContain('<a href="jobs/j1/session/">j1</a>');
    expect(html).toContain('<a href="jobs/j%222/session/">j&quot;2</a>');
  });

  it("links listing entries and shows the size attribute", () => {
    const html = renderHtml(sessionListingDoc({ files: [{ name: "out.txt", size: 12 }], dirs: ["gmlog"] }), {
      links: (path, text) => (path[1] === "dir" ? `${text}/` : text),
    });
    expect(html).toContain('<a href="out.txt">out.txt</a>');
    expect(html).toContain('<a href="gmlog/">gmlog</a>');
    expect(html).toContain("size=12");
  });

  it("refuses dangerous link schemes from the hook", () => {
    const html = renderHtml(el("r", [el("a", "x")]), { links: () => "javascript:alert(1)" });
    expect(html).not.toContain("<a ");
    const ok = renderHtml(el("r", [el("a", "x")]), { links: () => "https://h/x?a=1&b=2" });
    expect(ok).toContain('<a href="https://h/x?a=1&amp;b=2">x</a>');
  });
});
