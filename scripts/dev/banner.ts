// What `./ce start` prints once both components said they are ready: the addresses they actually
// listen on (from their own ready files), the back end in use, and how to use the CE.
import { readFileSync } from "node:fs";
import type { CompiledConfig } from "@ce/config";
import type { ReadyInfo } from "./component.js";

export function banner(o: { config: CompiledConfig; state: string; gateway: ReadyInfo; jem: ReadyInfo }): string {
  const { config, state } = o;
  const pki = `${state}/pki`;
  const url = config.endpoint.url;
  const listening = String(o.gateway.url);
  const listenPort = new URL(listening).port;
  const urlPort = new URL(url).port || (url.startsWith("https:") ? "443" : "80");
  const token = config.admin.tokenFile ? readFileSync(config.admin.tokenFile, "utf8").trim() : (config.admin.token ?? "(none)");
  const admin = [
    o.gateway.admin ? `${String(o.gateway.admin)} (gateway)` : undefined,
    o.jem.admin ? `${String(o.jem.admin)}/queues (JEM queues)` : undefined,
  ].filter(Boolean);
  return `
  CE running: ${url}   (back end: ${String(o.jem.backend)})
  Gateway: listening on ${listening} (pid ${o.gateway.pid})${urlPort === listenPort ? "" : `   NOTE: endpoint.url names port ${urlPort}, the gateway listens on ${listenPort}`}
  JEM: pid ${o.jem.pid}, back end ${String(o.jem.backend)}
  Admin: ${admin.length ? admin.join(", ") : "off (admin.enabled: false)"}
         token: ${token}
  Logs: ${state}/logs/{gateway,jem,redis}.log (this run; the previous run's in *.log.1)
        readable: tail -f ${state}/logs/jem.log | pnpm exec pino-pretty
  Config: ${process.env.CE_CONFIG}

  ARC client:
    export X509_USER_CERT=${pki}/user/cert.pem X509_USER_KEY=${pki}/user/key.pem
    export X509_CERT_DIR=${pki}/ca X509_USER_PROXY=${pki}/user/proxy.pem
    arcinfo -c ${url}
    arcsub -C ${url} -T arcrest myjob.xrsl ; arcstat -a ; arcget -a

  curl:
    curl --cacert ${pki}/ca/ca.pem --cert ${pki}/user/cert.pem --key ${pki}/user/key.pem \\
         -H 'Accept: application/json' ${url}/rest/1.1/jobs

  Browser: import ${pki}/user/user.p12 (password: ce-dev) and trust ${pki}/ca/ca.pem,
           then open ${url}/rest/1.1/jobs

  Ctrl-C stops the CE.`;
}
