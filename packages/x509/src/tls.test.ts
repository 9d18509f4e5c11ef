import { once } from "node:events";
import type { AddressInfo } from "node:net";
import { connect, createServer, type TLSSocket } from "node:tls";
import { describe, expect, it } from "vitest";
import { peerCertificateChain } from "./tls.js";
import { TrustStore } from "./truststore.js";
import { verifyChain, type VerifyResult } from "./verify.js";
import { createCA, createProxy, issueHostCert, issueUserCert } from "./testing.js";

describe("proxy client certificates over Node TLS", () => {
  const ca = createCA({ dn: "/DC=org/DC=nordugrid/O=TestCA/CN=TLS CA" });
  const host = issueHostCert(ca, { hostnames: ["localhost", "127.0.0.1"] });
  const user = issueUserCert(ca, { dn: "/DC=org/DC=nordugrid/O=TestCA/CN=TLS User" });
  const store = TrustStore.fromPem(ca.certPem);

  async function handshake(clientCertPem: string, clientKeyPem: string): Promise<VerifyResult> {
    const server = createServer({ key: host.keyPem, cert: host.certPem, requestCert: true, rejectUnauthorized: false });
    const result = new Promise<VerifyResult>((resolve) =>
      server.on("secureConnection", (s: TLSSocket) => {
        resolve(verifyChain(peerCertificateChain(s), store));
        s.end();
      }),
    );
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    const { port } = server.address() as AddressInfo;
    const client = connect({ host: "127.0.0.1", port, servername: "localhost", ca: ca.certPem, cert: clientCertPem, key: clientKeyPem });
    client.on("error", () => undefined);
    await once(client, "secureConnect");
    const r = await result;
    client.destroy();
    server.close();
    return r;
  }

  it("a proxy-of-proxy chain sent by the client is received and verified", async () => {
    const p2 = createProxy(createProxy(user));
    const r = await handshake(p2.chainPem, p2.keyPem);
    expect(r).toMatchObject({ ok: true, identity: user.dn, proxies: 2 });
  });

  it("a plain user certificate works the same way", async () => {
    expect(await handshake(user.certPem, user.keyPem)).toMatchObject({ ok: true, identity: user.dn, proxies: 0 });
  });
});
