import { describe, expect, it } from "vitest";
import { compileConfig } from "@ce/config";
import { publishOptions } from "./cli-accounting.js";

// How `ceadm accounting apel` reaches ARGO: a configured key, else ARGO's authentication service
// with the host certificate (the gateway's TLS pair unless accounting.apel names one).
const config = (apel: Record<string, unknown>) =>
  compileConfig(
    {
      gateway: { tls: { certFile: "/etc/ce/host.pem", keyFile: "/etc/ce/host.key" } },
      accounting: { apel: { targetUrl: "https://msg.argo.example", ...apel } },
    } as never,
    "/tmp",
  );

describe("publishOptions", () => {
  it("no key configured: the authentication service on port 8443 of the AMS host, with the host certificate", () => {
    expect(publishOptions(config({}), {}).argo).toMatchObject({
      token: undefined,
      authn: {
        url: "https://msg.argo.example:8443/v1/service-types/ams/hosts/msg.argo.example:authx509",
        certFile: "/etc/ce/host.pem",
        keyFile: "/etc/ce/host.key",
      },
    });
    expect(
      publishOptions(config({ authnUrl: "https://authn.example/v1/service-types/ams/hosts/msg.argo.example:authx509" }), {}).argo?.authn
        ?.url,
    ).toBe("https://authn.example/v1/service-types/ams/hosts/msg.argo.example:authx509");
  });

  it("a configured key is used as it is, without the authentication service", () => {
    expect(publishOptions(config({ token: "k" }), {}).argo).toMatchObject({ token: "k", authn: undefined });
  });
});
