import { describe, expect, it } from "vitest";
import { legacyTokenOwner, parseTokenOwner, tokenOwner } from "./owner.js";

describe("token owners", () => {
  it("two issuers whose names overlap never give one owner", () => {
    expect(tokenOwner("https://a.example", "r/x")).toBe("https://a.example/r%2Fx");
    expect(tokenOwner("https://a.example/r", "x")).toBe("https://a.example/r/x");
    const subs = ["x", "r/x", "r%2Fx", "%", "%25", "/", "//", "a%2F", "", "u@example.org", "r/x/y"];
    const issuers = ["https://a.example", "https://a.example/r", "https://a.example/r/x", "https://a.example/r%2Fx"];
    const seen = new Map<string, string>();
    for (const iss of issuers)
      for (const sub of subs) {
        const o = tokenOwner(iss, sub);
        expect(seen.get(o), `${iss} + ${sub} vs ${seen.get(o)}`).toBeUndefined();
        seen.set(o, `${iss} + ${sub}`);
        expect(parseTokenOwner(o)).toEqual({ iss, sub });
      }
  });

  it("a sub without / or % is written as before; DNs are not token owners", () => {
    expect(tokenOwner("https://iss.example", "u-123@x")).toBe("https://iss.example/u-123@x");
    expect(parseTokenOwner("/DC=org/CN=Jane")).toBeUndefined();
    expect(parseTokenOwner("https://iss.example/a%zz")).toBeUndefined();
  });

  it("an owner the old gateway wrote: moved when one issuer fits and its sub had a /, else left", () => {
    const A = "https://a.example";
    const B = "https://a.example/r";
    expect(legacyTokenOwner(`${A}/q/y`, [A, B])).toEqual({ kind: "to", owner: `${A}/q%2Fy` });
    expect(legacyTokenOwner(`${A}/u-1`, [A, B])).toEqual({ kind: "same" });
    expect(legacyTokenOwner(`${A}/q%2Fy`, [A, B])).toEqual({ kind: "same" }); // already moved
    expect(legacyTokenOwner(`${A}/r/x`, [A, B])).toEqual({ kind: "ambiguous", issuers: [A, B] });
    expect(legacyTokenOwner(`${A}/r/x`, [A])).toEqual({ kind: "to", owner: `${A}/r%2Fx` });
    expect(legacyTokenOwner("https://gone.example/u", [A])).toEqual({ kind: "unknown" });
    expect(legacyTokenOwner("/DC=org/CN=q/y", [A])).toEqual({ kind: "same" });
  });
});
