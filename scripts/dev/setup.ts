// First-start setup of the embedded development CE (`./ce start`): a development CA, a host
// certificate for localhost, a user certificate (+ .p12 for browsers and a fresh RFC 3820 proxy),
// secrets, and `.ce/ce.yaml`. Idempotent: existing files are kept; the proxy is renewed when old.
import { execFileSync, spawnSync } from "node:child_process";
import { generateKeyPairSync, randomBytes } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { resolve } from "node:path";
import YAML from "yaml";
import { createCA, createProxy, issueHostCert, issueUserCert, writeCADir, type TestCredential } from "@ce/x509/testing";
import { SecretBox } from "@ce/store";

const state = resolve(process.argv[2] ?? ".ce");
const pki = `${state}/pki`;
const fresh = () => generateKeyPairSync("rsa", { modulusLength: 2048 }).privateKey;
const P12_PASSWORD = "ce-dev";

function write(path: string, content: string, mode = 0o644) {
  writeFileSync(path, content, { mode });
  chmodSync(path, mode);
}

for (const d of ["pki/ca", "pki/ca-private", "pki/host", "pki/user", "control", "session", "rte", "redis", "logs", "secrets"]) {
  mkdirSync(`${state}/${d}`, { recursive: true });
}
// Secrets (Redis passwords, keys, tokens) and Redis' data/aclfile: the CE account only.
for (const d of ["secrets", "redis"]) chmodSync(`${state}/${d}`, 0o700);

let created = false;
if (!existsSync(`${pki}/ca-private/ca.key`)) {
  const ca = createCA({ dn: "/DC=org/DC=ce-dev/CN=CE Development CA", days: 3650, key: fresh() });
  writeCADir(`${pki}/ca`, [ca]);
  write(`${pki}/ca/ca.pem`, ca.certPem);
  // The CA key stays outside the CA directory the gateway trusts.
  write(`${pki}/ca-private/ca.key`, ca.keyPem, 0o600);
  const host = issueHostCert(ca, { hostnames: ["localhost", "127.0.0.1"], key: fresh() });
  write(`${pki}/host/cert.pem`, host.certPem);
  write(`${pki}/host/key.pem`, host.keyPem, 0o600);
  const user = issueUserCert(ca, { dn: `/DC=org/DC=ce-dev/O=Users/CN=${process.env.USER || "dev"} Dev User`, key: fresh() });
  write(`${pki}/user/cert.pem`, user.certPem);
  write(`${pki}/user/key.pem`, user.keyPem, 0o400);
  execFileSync("openssl", [
    "pkcs12",
    "-export",
    "-in",
    `${pki}/user/cert.pem`,
    "-inkey",
    `${pki}/user/key.pem`,
    "-certfile",
    `${pki}/ca/ca.pem`,
    "-out",
    `${pki}/user/user.p12`,
    "-passout",
    `pass:${P12_PASSWORD}`,
    "-name",
    "CE dev user",
  ]);
  created = true;
}

// A proxy good for 12 h, renewed when less than 2 h are left, so the ARC client works at once.
const proxyPath = `${pki}/user/proxy.pem`;
if (!existsSync(proxyPath) || Date.now() - statSync(proxyPath).mtimeMs > 10 * 3600_000) {
  const userCred = {
    certPem: readFileSync(`${pki}/user/cert.pem`, "utf8"),
    keyPem: readFileSync(`${pki}/user/key.pem`, "utf8"),
  };
  const proxy: TestCredential = createProxy(userCred.certPem, userCred.keyPem, { lifetimeSeconds: 12 * 3600, freshKey: true });
  write(proxyPath, proxy.filePem, 0o600);
}

const secret = (name: string, make: () => string) => {
  const p = `${state}/secrets/${name}`;
  if (!existsSync(p)) write(p, make(), 0o600);
  return p;
};
const keyFile = secret("delegation.key", () => SecretBox.generateKey());
const adminFile = secret("admin.token", () => randomBytes(24).toString("base64url"));
// Redis ACL users of the embedded Redis (scripts/dev/embedded-redis.ts writes the aclfile from them).
const redisGateway = secret("redis-gateway.password", () => randomBytes(24).toString("base64url"));
const redisJem = secret("redis-jem.password", () => randomBytes(24).toString("base64url"));

// Run as root: every job runs as one unprivileged account (docs/security.md "Privilege separation"), made
// here when missing; the state dir is then traverse-only for it (session and batch dirs by name).
// Not root: no mapping, jobs run as the developer's own account (developer-only mode).
const JOB_ACCOUNT = process.env.CE_DEV_JOB_ACCOUNT ?? "cejob";
const asRoot = process.getuid?.() === 0 && process.env.CE_DEV_MAPPING !== "off";
if (asRoot) {
  const known = () => spawnSync("getent", ["passwd", JOB_ACCOUNT]).status === 0;
  // A user group of its own (gid ≥ 1000), no home, no login shell. Parallel setups (test stacks)
  // race here: /etc/passwd locked (exit 10) is retried, "exists" (9) is success.
  for (let i = 0; !known(); i++) {
    const r = spawnSync("useradd", ["-M", "-U", "-s", "/usr/sbin/nologin", "-c", "CE jobs (embedded default)", JOB_ACCOUNT], {
      encoding: "utf8",
    });
    if (r.status === 0 || r.status === 9) break;
    if (i >= 50) throw new Error(`useradd ${JOB_ACCOUNT} failed: ${r.stderr}`);
    execFileSync("sleep", ["0.1"]);
  }
  chmodSync(state, 0o711);
}

const cfgPath = `${state}/ce.yaml`;
if (!existsSync(cfgPath)) {
  const cfg = {
    endpoint: { url: "https://localhost:8443/arex", adminDomain: "DEV" },
    paths: { stateDir: state },
    redis: {
      url: "redis://127.0.0.1:6379",
      prefix: "{ce}",
      embedded: true,
      users: { gateway: { username: "gateway", passwordFile: redisGateway }, jem: { username: "jem", passwordFile: redisJem } },
    },
    gateway: { host: "127.0.0.1", port: 8443, tls: { certFile: `${pki}/host/cert.pem`, keyFile: `${pki}/host/key.pem` } },
    auth: { caDir: `${pki}/ca` },
    delegations: { encryptionKeyFile: keyFile },
    jobs: { queues: [{ name: "main" }] },
    lrms: { backend: "fork" },
    // One input cache beside the session root (docs/cache.md): the JEM makes and owns it.
    staging: { cache: { dirs: [{ path: `${state}/cache` }] } },
    admin: { tokenFile: adminFile },
    ...(asRoot ? { mapping: { rules: [{ name: "embedded default", match: "*", user: JOB_ACCOUNT }] } } : {}),
  };
  write(cfgPath, `# Development configuration written by ./ce start (every key: docs/configuration.md).\n${YAML.stringify(cfg)}`);
}
console.log(JSON.stringify({ state, config: cfgPath, created, p12Password: P12_PASSWORD, proxy: proxyPath }));
