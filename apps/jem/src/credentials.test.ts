import { describe, expect, it } from "vitest";
import { tokenAudiences, tokenRefusal, WLCG_ANY_AUDIENCE } from "./credentials.js";

const jwt = (claims: object) =>
  `${Buffer.from('{"alg":"RS256"}').toString("base64url")}.${Buffer.from(JSON.stringify(claims)).toString("base64url")}.sig`;

describe("where a token may be sent", () => {
  it("reads aud as a string or a list; an opaque or broken token has none", () => {
    expect(tokenAudiences(jwt({ aud: "https://se.example.org" }))).toEqual(["https://se.example.org"]);
    expect(tokenAudiences(jwt({ aud: ["a", 3, "b"] }))).toEqual(["a", "b"]);
    expect(tokenAudiences("opaque-token")).toBeUndefined();
    expect(tokenAudiences("a.%%%.c")).toBeUndefined();
  });

  it("only over https, only to an aud origin (scheme, host and port; default port normalized)", () => {
    const t = jwt({ aud: ["https://se.example.org", "https://dav.example.org:2880/base"] });
    expect(tokenRefusal(t, "https://se.example.org/data/f", false)).toBeUndefined();
    expect(tokenRefusal(t, "https://se.example.org:443/f", false)).toBeUndefined();
    expect(tokenRefusal(t, "https://dav.example.org:2880/other/f", false)).toBeUndefined();
    expect(tokenRefusal(t, "http://se.example.org/f", false)).toBe("a token is sent over https only");
    expect(tokenRefusal(t, "https://se.example.org:8443/f", false)).toMatch(/is not the token's audience/);
    expect(tokenRefusal(t, "https://se.example.org.evil.net/f", false)).toMatch(/is not the token's audience/);
    expect(tokenRefusal(jwt({ aud: "se.example.org" }), "https://se.example.org/f", false)).toMatch(/is not the token's audience/);
    expect(tokenRefusal("opaque", "https://se.example.org/f", true)).toBe("the token names no audience (aud)");
  });

  it("the WLCG any-audience only when allowed, and it never matches wlcg.cern.ch by origin", () => {
    const any = jwt({ aud: WLCG_ANY_AUDIENCE });
    expect(tokenRefusal(any, "https://se.example.org/f", false)).toMatch(/WLCG any-audience/);
    expect(tokenRefusal(any, "https://wlcg.cern.ch/f", false)).toMatch(/WLCG any-audience/);
    expect(tokenRefusal(any, "https://se.example.org/f", true)).toBeUndefined();
    expect(tokenRefusal(any, "http://se.example.org/f", true)).toBe("a token is sent over https only");
    const both = jwt({ aud: [WLCG_ANY_AUDIENCE, "https://se.example.org"] });
    expect(tokenRefusal(both, "https://se.example.org/f", false)).toBeUndefined();
    expect(tokenRefusal(both, "https://other.example.org/f", false)).toMatch(/is not the token's audience/);
  });
});
