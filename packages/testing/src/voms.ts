/**
 * A test VOMS server for a stack's state directory (`./stack.ts` `prepare`): a VOMS
 * host certificate issued by the stack's development CA, its `.lsc` in the default vomsdir, and
 * real VOMS proxies of the stack's user made by voms-proxy-fake.
 */
import { createPrivateKey, X509Certificate } from "node:crypto";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { credential, issueHostCert, lscFor, vomsProxy, type VomsProxyOptions } from "@ce/x509/testing";

export interface StackVoms {
  /** Writes a VOMS proxy of the stack's user (mode 0600) and returns its path. */
  proxy(file: string, o: VomsProxyOptions): string;
}

export function stackVoms(state: string, vos: string[]): StackVoms {
  const pki = join(state, "pki");
  const ca = credential(
    new X509Certificate(readFileSync(join(pki, "ca", "ca.pem"))),
    createPrivateKey(readFileSync(join(pki, "ca-private", "ca.key"))),
  );
  const server = issueHostCert(ca, { hostnames: ["voms.example.org"], dn: "/DC=org/DC=ce-dev/CN=voms.example.org" });
  for (const vo of vos) {
    mkdirSync(join(pki, "vomsdir", vo), { recursive: true });
    writeFileSync(join(pki, "vomsdir", vo, "voms.example.org.lsc"), lscFor(server));
  }
  const user = credential(
    new X509Certificate(readFileSync(join(pki, "user", "cert.pem"))),
    createPrivateKey(readFileSync(join(pki, "user", "key.pem"))),
    ca,
  );
  return {
    proxy(file, o) {
      writeFileSync(file, vomsProxy(user, server, o, join(pki, "ca")), { mode: 0o600 });
      return file;
    },
  };
}
