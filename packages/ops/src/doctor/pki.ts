import { createPrivateKey, X509Certificate } from "node:crypto";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import type { CompiledConfig } from "@ce/config";
import { parseCrl, parseLsc, pemBlocks } from "@ce/x509";
import { fatal, octal, type Problem, reportedByStart, warning } from "./problem.js";

const DAY = 86_400_000;
/** A host certificate ending within this is a warning: the site has a month to renew it. */
export const CERT_WARN_DAYS = 30;

const reason = (e: unknown) => {
  const code = (e as NodeJS.ErrnoException).code;
  return code === "ENOENT" ? "no such file" : code === "EACCES" ? "permission denied" : (e as Error).message.split("\n")[0]!;
};
const day = (d: Date) => d.toISOString().slice(0, 10);

/** Host names that only ever appear in an example: the shipped /etc/ce/ce.yaml says `ce.example.org`. */
const PLACEHOLDER_HOST = /(^|\.)example(\.(org|com|net))?$/i;

/** The endpoint and the TLS files: unset or still the placeholder of the shipped configuration. */
export function endpointProblems(c: CompiledConfig, file: string, role?: "gateway" | "jem"): Problem[] {
  const out: Problem[] = [];
  const host = new URL(c.endpoint.url).hostname;
  if (PLACEHOLDER_HOST.test(host))
    out.push(
      fatal(
        "config",
        `endpoint.url ${c.endpoint.url} is still the placeholder of the shipped configuration`,
        `set endpoint.url in ${file} to this CE's public URL (https://<host name>:443/arex)`,
      ),
    );
  // The gateway's own TLS settings: a JEM serves no HTTPS and does not need them.
  if (role !== "jem" && !c.gateway.plainHttp.enabled && (!c.gateway.tls.certFile || !c.gateway.tls.keyFile))
    out.push(
      fatal(
        "config",
        "gateway.tls.certFile and gateway.tls.keyFile are not both set (the gateway serves HTTPS only with a host certificate)",
        `set both in ${file}, e.g. /etc/grid-security/hostcert.pem and /etc/grid-security/hostkey.pem`,
      ),
    );
  return out;
}

/** Host certificate: readable, in its validity (a warning CERT_WARN_DAYS before the end), the endpoint's name in its SAN, the key its own and private. */
export function hostCertProblems(c: CompiledConfig, now = new Date()): Problem[] {
  const { certFile, keyFile } = c.gateway.tls;
  if (!certFile || !keyFile) return [];
  const out: Problem[] = [];
  let cert: X509Certificate;
  try {
    const pem = pemBlocks(readFileSync(certFile, "latin1")).find((b) => b.label === "CERTIFICATE");
    cert = new X509Certificate(pem ? pem.der : readFileSync(certFile));
  } catch (e) {
    return [
      reportedByStart(
        fatal(
          "host-cert",
          `cannot read the host certificate ${certFile} (gateway.tls.certFile): ${reason(e)}`,
          `install the host certificate as ${certFile}`,
        ),
      ),
    ];
  }
  const notAfter = new Date(cert.validTo);
  const notBefore = new Date(cert.validFrom);
  const renew = `renew the host certificate and install it as ${certFile} (key: ${keyFile}), then restart the gateways`;
  if (notAfter <= now) out.push(fatal("host-cert", `host certificate ${certFile} expired on ${day(notAfter)}`, renew));
  else if (notAfter.getTime() - now.getTime() < CERT_WARN_DAYS * DAY)
    out.push(warning("host-cert", `host certificate ${certFile} expires on ${day(notAfter)}, within ${CERT_WARN_DAYS} days`, renew));
  if (notBefore > now)
    out.push(
      fatal(
        "host-cert",
        `host certificate ${certFile} is not valid before ${cert.validFrom}`,
        "check the clock of this host, or install a certificate valid now",
      ),
    );
  const host = new URL(c.endpoint.url).hostname.replace(/^\[(.*)\]$/, "$1");
  const named = /^[\d.]+$|:/.test(host) ? cert.checkIP(host) : cert.checkHost(host, { subject: "never" });
  if (!named)
    out.push(
      warning(
        "host-cert",
        `host certificate ${certFile} does not name ${host} (endpoint.url) in its subjectAltName: clients refuse the TLS connection`,
        `request a host certificate with DNS:${host} in its subjectAltName`,
      ),
    );
  try {
    const st = statSync(keyFile);
    if (st.mode & 0o007)
      out.push(
        fatal(
          "host-cert",
          `host key ${keyFile} is mode ${octal(st.mode)}: every local account can read it`,
          `chmod 600 ${keyFile} (or 640 with group ce)`,
        ),
      );
    else if (st.mode & 0o020)
      out.push(warning("host-cert", `host key ${keyFile} is mode ${octal(st.mode)}: its group can change it`, `chmod g-w ${keyFile}`));
    const key = createPrivateKey(readFileSync(keyFile));
    if (!cert.checkPrivateKey(key))
      out.push(
        fatal(
          "host-cert",
          `host key ${keyFile} is not the key of the certificate ${certFile}`,
          `install the key that belongs to ${certFile}`,
        ),
      );
  } catch (e) {
    out.push(
      reportedByStart(
        fatal(
          "host-cert",
          `cannot read the host key ${keyFile} (gateway.tls.keyFile): ${reason(e)}`,
          `install the host key as ${keyFile}, readable by the CE's account`,
        ),
      ),
    );
  }
  return out;
}

/** CA directory (OpenSSL hashed layout): present, with CA certificates, and CRLs within their nextUpdate. */
export function caDirProblems(c: CompiledConfig, now = new Date()): Problem[] {
  const dir = c.auth.caDir;
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch (e) {
    return [
      reportedByStart(
        fatal(
          "ca-dir",
          `cannot read the CA directory ${dir} (auth.caDir): ${reason(e)}`,
          "install the IGTF CA bundle (ca-policy-egi-core) or point auth.caDir at your CA directory",
        ),
      ),
    ];
  }
  const out: Problem[] = [];
  if (!names.some((n) => /^[0-9a-f]{8}\.\d+$/.test(n)))
    out.push(
      warning(
        "ca-dir",
        `CA directory ${dir} holds no CA certificates (<hash>.0)`,
        `install the CA certificates with their hash links (openssl rehash ${dir})`,
      ),
    );
  const expired: string[] = [];
  for (const n of names.filter((f) => /^[0-9a-f]{8}\.r\d+$/.test(f)).sort()) {
    try {
      const raw = readFileSync(join(dir, n));
      const pem = pemBlocks(raw.toString("latin1")).find((b) => b.label === "X509 CRL");
      const crl = parseCrl(pem ? pem.der : raw);
      if (crl.nextUpdate && crl.nextUpdate < now) expired.push(`${n} (next update was due ${day(crl.nextUpdate)})`);
    } catch (e) {
      out.push(warning("ca-dir", `CRL ${join(dir, n)} does not parse: ${reason(e)}`, "run fetch-crl, or remove the file"));
    }
  }
  if (expired.length > 0)
    out.push(
      warning(
        "ca-dir",
        `${expired.length} CRL(s) in ${dir} are past their next update: ${expired.slice(0, 5).join(", ")}${expired.length > 5 ? ", …" : ""}; with auth.x509.crlExpired deny every certificate their CAs issued is refused`,
        "run fetch-crl and enable its timer (systemctl enable --now fetch-crl.timer)",
      ),
    );
  return out;
}

/** Whether any rule looks at VOMS attributes (then a vomsdir is needed). */
function usesVoms(c: CompiledConfig): boolean {
  const rules = [
    ...c.auth.allow,
    ...c.jobs.queues.flatMap((q) => q.allow),
    ...(c.mapping?.rules.flatMap((r) => (Array.isArray(r.match) ? r.match : [r.match])) ?? []),
  ];
  return rules.some((r) => /^(vo|fqan):/.test(r));
}

/** vomsdir: `<vo>/<host>.lsc` files each with a chain of at least the server and its CA. */
export function vomsDirProblems(c: CompiledConfig): Problem[] {
  const dir = c.auth.voms.dir;
  let vos: string[];
  try {
    vos = readdirSync(dir, { withFileTypes: true })
      .filter((e) => e.isDirectory())
      .map((e) => e.name);
  } catch (e) {
    if (!usesVoms(c)) return [];
    return [
      warning(
        "vomsdir",
        `cannot read the vomsdir ${dir} (auth.voms.dir): ${reason(e)}; rules name VOs, and no VOMS attribute can be verified`,
        `create ${dir}/<vo>/<voms host>.lsc for each VO (packages such as wlcg-voms-<vo>)`,
      ),
    ];
  }
  const out: Problem[] = [];
  if (vos.length === 0 && usesVoms(c))
    out.push(warning("vomsdir", `vomsdir ${dir} has no VO directories; rules name VOs`, `create ${dir}/<vo>/<voms host>.lsc for each VO`));
  for (const vo of vos) {
    let files: string[];
    try {
      files = readdirSync(join(dir, vo)).filter((f) => /\.(lsc|pem)$/.test(f));
    } catch (e) {
      out.push(warning("vomsdir", `cannot read ${join(dir, vo)}: ${reason(e)}`, `chmod 755 ${join(dir, vo)}`));
      continue;
    }
    if (files.length === 0)
      out.push(warning("vomsdir", `${join(dir, vo)} holds no .lsc file`, `add <voms host>.lsc for VO ${vo}, or remove the directory`));
    for (const f of files.filter((n) => n.endsWith(".lsc"))) {
      const file = join(dir, vo, f);
      try {
        const chains = parseLsc(readFileSync(file, "utf8"));
        if (chains.length === 0 || chains.some((ch) => ch.length < 2))
          out.push(
            warning(
              "vomsdir",
              `${file} does not list the VOMS server's DN and its CA's DN`,
              `write the server DN and the CA DN on two lines (as the VO publishes them)`,
            ),
          );
      } catch (e) {
        out.push(warning("vomsdir", `cannot read ${file}: ${reason(e)}`, `chmod 644 ${file}`));
      }
    }
  }
  return out;
}
