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
