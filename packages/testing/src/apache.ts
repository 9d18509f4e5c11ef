/**
 * A private Apache httpd with mod_dav (Debian's apache2) on loopback for staging tests: one
 * plain-HTTP and one TLS listener on free 127.0.0.1 ports, both serving the same WebDAV tree.
 * Its own ServerRoot, pid file and logs under a temporary directory; started and stopped by the
 * test (by the pid it writes). TLS is server-side only: Debian 12's Apache with OpenSSL 3 refuses
 * RFC 3820 proxies as client certificates (test-servers.md), so what the JEM sends is read from the
 * access log (`%{Authorization}i`), not from a TLS verification.
 */
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { chmod, chown, mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "./ports.js";

export interface Apache {
  /** `http://127.0.0.1:<port>` and `https://localhost:<port>` (the host certificate names localhost). */
  httpUrl: string;
  httpsUrl: string;
  /** The served tree (files the test puts here are served; uploads land here). */
  docRoot: string;
  /** Access log lines: `<method> <path> <status> <authorization or ->`. */
  requests(): Promise<Array<{ method: string; path: string; status: number; authorization: string }>>;
  close(): Promise<void>;
}

export function haveApache(): boolean {
  return existsSync("/usr/sbin/apache2") && existsSync("/usr/lib/apache2/modules/mod_dav_fs.so");
}

const MODULES = ["mpm_event", "authz_core", "dav", "dav_fs", "ssl", "socache_shmcb", "mime", "headers"];

export async function startApache(tls: { certPem: string; keyPem: string }): Promise<Apache> {
  const root = await mkdtemp(join(tmpdir(), "jem-apache-"));
  const docRoot = join(root, "dav");
  await mkdir(docRoot);
  await mkdir(join(root, "run"));
  await mkdir(join(root, "lock"));
  await writeFile(join(root, "host.pem"), tls.certPem);
  await writeFile(join(root, "host.key"), tls.keyPem, { mode: 0o600 });
  const [httpPort, httpsPort] = [await freePort(), await freePort()];
  // Apache drops to www-data when started as root: the tree it writes must be that account's.
  const asRoot = process.getuid?.() === 0;
  const user = asRoot ? "www-data" : (process.env.USER ?? "nobody");
  if (asRoot) {
    const uid = Number(execFileSync("id", ["-u", user]).toString().trim());
    const gid = Number(execFileSync("id", ["-g", user]).toString().trim());
    await chown(docRoot, uid, gid);
    await chown(join(root, "lock"), uid, gid);
    await chmod(root, 0o755);
  }
  const conf = `
ServerRoot "${root}"
ServerName localhost
PidFile "${root}/run/httpd.pid"
Mutex file:${root}/run default
DefaultRuntimeDir "${root}/run"
User ${user}
Group ${asRoot ? "www-data" : user}
${MODULES.map((m) => `LoadModule ${m}_module /usr/lib/apache2/modules/mod_${m}.so`).join("\n")}
Listen 127.0.0.1:${httpPort}
Listen 127.0.0.1:${httpsPort}
ErrorLog "${root}/error.log"
LogLevel warn
LogFormat "%m %U %>s %{Authorization}i" staging
CustomLog "${root}/access.log" staging
DAVLockDB "${root}/lock/davlock"
SSLSessionCache none
TypesConfig /etc/mime.types
DocumentRoot "${docRoot}"
<Directory "${docRoot}">
  Dav On
  Require all granted
  Options None
  AllowOverride None
</Directory>
<VirtualHost 127.0.0.1:${httpsPort}>
  SSLEngine on
  SSLCertificateFile "${root}/host.pem"
  SSLCertificateKeyFile "${root}/host.key"
</VirtualHost>
`;
  const confFile = join(root, "httpd.conf");
  await writeFile(confFile, conf);
  execFileSync("/usr/sbin/apache2", ["-f", confFile, "-k", "start"], {
    env: { ...process.env, APACHE_RUN_DIR: join(root, "run") },
    stdio: "pipe",
  });
  const pidFile = join(root, "run", "httpd.pid");
  for (let i = 0; i < 100 && !existsSync(pidFile); i++) await new Promise((r) => setTimeout(r, 50));
  if (!existsSync(pidFile)) throw new Error(`apache2 did not start: ${await readFile(join(root, "error.log"), "utf8").catch(() => "")}`);
  return {
    httpUrl: `http://127.0.0.1:${httpPort}`,
    httpsUrl: `https://localhost:${httpsPort}`,
    docRoot,
    async requests() {
      const text = await readFile(join(root, "access.log"), "utf8").catch(() => "");
      return text
        .split("\n")
        .filter(Boolean)
        .map((l) => {
          const [method, path, status, ...auth] = l.split(" ");
          return { method: method!, path: decodeURIComponent(path!), status: Number(status), authorization: auth.join(" ") };
        });
    },
    async close() {
      const pid = Number((await readFile(pidFile, "utf8").catch(() => "")).trim());
      if (pid > 0) {
        try {
          process.kill(pid, "SIGTERM");
        } catch {
          /* already gone */
        }
        for (let i = 0; i < 100; i++) {
          try {
            process.kill(pid, 0);
          } catch {
            break;
          }
          await new Promise((r) => setTimeout(r, 50));
        }
      }
      await rm(root, { recursive: true, force: true });
    },
  };
}
