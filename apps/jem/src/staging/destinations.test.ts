import { describe, expect, it } from "vitest";
import { compileConfig, type ConfigInput } from "@ce/config";
import { DestinationRefused, destinationPolicy, parseCidr } from "./destinations.js";

const policy = (staging: ConfigInput["staging"] = {}) =>
  destinationPolicy(compileConfig({ paths: { stateDir: "/tmp/ce-dest-test" }, staging }, "/tmp"));
const refusal = async (p: ReturnType<typeof policy>, host: string, port = 443) => {
  try {
    await p.resolve(host, port);
    return undefined;
  } catch (e) {
    if (e instanceof DestinationRefused) return e.reason;
    throw e;
  }
};

describe("staging destination policy", () => {
  it("refuses internal ranges by default, each named, mapped IPv6 forms included", async () => {
    const p = policy();
    expect(await refusal(p, "127.0.0.1")).toBe("127.0.0.1 is loopback (staging.allowNetworks does not include it)");
    expect(await refusal(p, "[::1]")).toMatch(/^::1 is loopback/);
    expect(await refusal(p, "169.254.169.254")).toMatch(/is link-local/);
    expect(await refusal(p, "fe80::1")).toMatch(/is link-local/);
    expect(await refusal(p, "10.1.2.3")).toMatch(/is private/);
    expect(await refusal(p, "172.31.0.1")).toMatch(/is private/);
    expect(await refusal(p, "192.168.1.1")).toMatch(/is private/);
    expect(await refusal(p, "fd12:3456::1")).toMatch(/is unique-local/);
    expect(await refusal(p, "0.0.0.0")).toMatch(/is unspecified/);
    expect(await refusal(p, "::ffff:127.0.0.1")).toMatch(/^127\.0\.0\.1 is loopback/);
    expect(await refusal(p, "::ffff:a9fe:a9fe")).toMatch(/^169\.254\.169\.254 is link-local/);
    expect(await refusal(p, "64:ff9b::10.0.0.1")).toMatch(/^10\.0\.0\.1 is private/);
    expect(await refusal(p, "localhost")).toMatch(/is loopback/);
    expect(await refusal(p, "8.8.8.8")).toBeUndefined();
    expect(await refusal(p, "2001:4860:4860::8888")).toBeUndefined();
  });

  it("opens exactly the listed networks, never the CE's own listeners or Redis", async () => {
    const p = policy({ allowNetworks: ["10.20.0.0/16", "127.0.0.0/8"] });
    expect(await refusal(p, "10.20.5.5")).toBeUndefined();
    expect(await refusal(p, "10.21.0.1")).toMatch(/is private/);
    expect(await refusal(p, "127.0.0.1", 9000)).toBeUndefined();
    expect(await refusal(p, "127.0.0.1", 8443)).toMatch(/own gateway listener/);
    expect(await refusal(p, "127.0.0.1", 8445)).toMatch(/own admin\.jemPort listener/);
    expect(await refusal(p, "127.0.0.1", 6379)).toMatch(/own redis listener/);
  });

  it("parses CIDRs and the schema refuses malformed ones", () => {
    expect(parseCidr("10.0.0.0/8")).toEqual({ net: "10.0.0.0", prefix: 8, family: "ipv4" });
    expect(parseCidr("fd00::/8")).toEqual({ net: "fd00::", prefix: 8, family: "ipv6" });
    expect(parseCidr("192.0.2.7")).toEqual({ net: "192.0.2.7", prefix: 32, family: "ipv4" });
    for (const bad of ["10.0.0.0/33", "fd00::/129", "example.org/8", "10.0.0.0/8/1", "10.0.0.0/x"]) {
      expect(parseCidr(bad)).toBeUndefined();
      expect(() => policy({ allowNetworks: [bad] })).toThrow();
    }
  });
});
