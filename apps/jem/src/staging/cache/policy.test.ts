import { describe, expect, it } from "vitest";
import type { CompiledConfig } from "@ce/config";
import { cacheModeOf, cacheTarget, urlHash } from "./policy.js";

const config = {
  staging: { cache: { dirs: [{ path: "/c", drain: false, readonly: false }], default: "yes" } },
} as unknown as CompiledConfig;

describe("cache names and modes", () => {
  it("names a rucio input by its DID at its server, whatever the options and replica", () => {
    const a = cacheTarget("rucio://rucio.example.org;rucioaccount=pilot;transferprotocol=https;cache=invariant/replicas/mc23/EVNT.1", {});
    const b = cacheTarget("rucio://rucio.example.org/replicas/mc23/EVNT.1", { rucioaccount: "other" });
    expect(a.key).toBe("rucio://rucio.example.org/mc23:EVNT.1");
    expect(b.hash).toBe(a.hash);
    expect(cacheTarget("rucio://elsewhere.example.org/replicas/mc23/EVNT.1", {}).hash).not.toBe(a.hash);
  });

  it("a crafted DID cannot take another DID's or server's entry, nor name a path", () => {
    const t = (u: string) => cacheTarget(u, {});
    const plain = t("rucio://r.example.org/replicas/mc23/EVNT:1");
    expect(plain.key).toBe("rucio://r.example.org/mc23:EVNT:1");
    expect(plain.hash).toMatch(/^[0-9a-f]{64}$/); // the entry's file name: never a path of the DID
    // `scope:name` splits at the first colon only because a scope has none: `mc23:EVNT` + `1` is refused.
    for (const bad of [
      "rucio://r.example.org/replicas/mc23%3AEVNT/1",
      "rucio://r.example.org/replicas/mc23%2F..%2F..%2Fetc/passwd",
      "rucio://r.example.org/replicas/mc23/..%2F..%2Fetc%2Fpasswd",
      "rucio://r.example.org/replicas/mc23/a/b",
      "rucio://u:p@r.example.org/replicas/mc23/EVNT.1",
      `rucio://r.example.org/replicas/mc23/${"n".repeat(251)}`,
    ]) {
      expect(() => t(bad), bad).toThrow(/is not rucio:\/\/<server>\/replicas\/<scope>\/<name>/);
    }
    // Another port is another server; the same server however spelled is one entry.
    expect(t("rucio://r.example.org:8443/replicas/mc23/EVNT:1").hash).not.toBe(plain.hash);
    expect(t("rucio://R.Example.ORG:443/replicas/mc23/EVNT%3A1").hash).toBe(plain.hash);
    // No other scheme's key can spell a rucio key.
    expect(t("https://r.example.org/mc23:EVNT:1").key.startsWith("rucio:")).toBe(false);
  });

  it("names a WebDAV input by its http(s) form, the same entry as https", () => {
    const t = cacheTarget("davs://u:p@dav.example.org/in/f.root:checksumtype=adler32:checksumvalue=01", {});
    expect(t.wire).toBe("https://u:p@dav.example.org/in/f.root");
    expect(t.hash).toBe(urlHash("https://dav.example.org/in/f.root"));
  });

  it("takes cache= from inside the URL; file inputs are never cached", () => {
    expect(cacheModeOf({ source: "rucio://r.example.org;cache=invariant/replicas/s/n", options: {} }, config)).toBe("invariant");
    expect(cacheModeOf({ source: "root://x.example.org//f", options: { cache: "check" } }, config)).toBe("check");
    expect(cacheModeOf({ source: "file:///cvmfs/a/f", options: { cache: "yes" } }, config)).toBe("no");
  });
});
