/**
 * A private xrootd (Debian's xrootd-server) for staging tests. xrootd has no listen-address
 * setting, so it runs with a tiny LD_PRELOAD shim (bind-loopback.c, compiled here with cc) that
 * turns its wildcard bind into 127.0.0.1: nothing listens beyond loopback. It runs as the
 * `xrootd` account (it refuses root), with adler32 checksums on; anonymous, or with `gsi` only
 * GSI (`sec.protbind * only gsi`) trusting the given test CA, any DN accepted, no CRL, no VOMS.
 * Clients dial `localhost`, the host certificate's name.
 */
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { chmod, chown, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { connect } from "node:net";
import { issueHostCert, type TestCredential } from "@ce/x509/testing";
import { freePort } from "./ports.js";

export interface Xrootd {
  /** `root://localhost:<port>` */
  url: string;
  port: number;
  dataDir: string;
  /** With `gsi`: the CA directory (hashed layout) clients verify the server with. */
  certDir?: string;
  close(): Promise<void>;
}

export function haveXrootd(): boolean {
  const hasUser = (() => {
    try {
      execFileSync("id", ["xrootd"], { stdio: "ignore" });
      return true;
    } catch {
      return false;
    }
  })();
  return process.getuid?.() === 0 && hasUser && existsSync("/usr/bin/xrootd") && existsSync("/usr/bin/xrdcp") && existsSync("/usr/bin/cc");
}

export interface XrootdOptions {
  /** Require GSI, trusting this CA (the server's host certificate is issued by it too). */
  gsi?: { ca: TestCredential };
  /** `host:port` every request is redirected to (`xrootd.redirect`): a redirector in front of a data server. */
  redirectTo?: string;
}

const LIB = "/usr/lib/x86_64-linux-gnu";

/** `<dir>/<subject hash>.0` = the CA certificate, as xrootd and OpenSSL look CAs up. */
async function hashedCaDir(dir: string, ca: TestCredential): Promise<void> {
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, "ca.pem"), ca.certPem);
  const hash = execFileSync("openssl", ["x509", "-hash", "-noout", "-in", join(dir, "ca.pem")])
    .toString()
    .trim();
  await writeFile(join(dir, `${hash}.0`), ca.certPem, { mode: 0o644 });
}

function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect(port, "127.0.0.1", () => {
      s.destroy();
      resolve(true);
    });
    s.on("error", () => resolve(false));
  });
}

export async function startXrootd(opts: XrootdOptions = {}): Promise<Xrootd> {
  const root = await mkdtemp(join(tmpdir(), "jem-xrootd-"));
  await chmod(root, 0o755);
  const dataDir = join(root, "data");
  const admin = join(root, "admin");
  await mkdir(dataDir);
  await mkdir(admin);
  const uid = Number(execFileSync("id", ["-u", "xrootd"]).toString().trim());
  const gid = Number(execFileSync("id", ["-g", "xrootd"]).toString().trim());
  await chown(dataDir, uid, gid);
  await chown(admin, uid, gid);
  const shim = join(root, "bind-loopback.so");
  execFileSync("cc", ["-shared", "-fPIC", "-o", shim, fileURLToPath(new URL("./bind-loopback.c", import.meta.url)), "-ldl"]);
  const port = await freePort();
  const security: string[] = [];
  let certDir: string | undefined;
  if (opts.gsi) {
    certDir = join(root, "certificates");
    await hashedCaDir(certDir, opts.gsi.ca);
    const host = issueHostCert(opts.gsi.ca, { hostnames: ["localhost"] });
    // xrootd reads its host key as the xrootd account and wants it private (0400).
    const cert = join(root, "hostcert.pem");
    const key = join(root, "hostkey.pem");
    await writeFile(cert, host.certPem, { mode: 0o644 });
    await writeFile(key, host.keyPem, { mode: 0o400 });
    await chown(key, uid, gid);
    security.push(
      "xrootd.seclib libXrdSec.so",
      `sec.protocol ${LIB} gsi -certdir:${certDir} -cert:${cert} -key:${key} -gmapopt:10 -crl:0 -vomsat:0`,
      "sec.protbind * only gsi",
    );
  }
  await writeFile(
    join(root, "xrootd.cfg"),
    [
      `xrd.port ${port}`,
      "all.export /",
      `oss.localroot ${dataDir}`,
      "xrootd.chksum adler32",
      `all.adminpath ${admin}`,
      `all.pidpath ${admin}`,
      ...security,
      // Opens (and the rest) by the first line; stat only when named.
      ...(opts.redirectTo ? [`xrootd.redirect ${opts.redirectTo} /`, `xrootd.redirect ${opts.redirectTo} stat /`] : []),
      "",
    ].join("\n"),
  );
  const child: ChildProcess = spawn("/usr/bin/xrootd", ["-c", join(root, "xrootd.cfg"), "-R", "xrootd"], {
    env: { ...process.env, LD_PRELOAD: shim },
    stdio: "ignore",
  });
  const url = `root://localhost:${port}`;
  // It binds its port once its protocols (security included) are loaded.
  for (let i = 0; !(await listening(port)); i++) {
    if (i > 50 || child.exitCode !== null) {
      child.kill("SIGTERM");
      throw new Error(`xrootd did not start (exit ${child.exitCode})`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    url,
    port,
    dataDir,
    ...(certDir ? { certDir } : {}),
    async close() {
      if (child.exitCode === null) {
        child.kill("SIGTERM");
        await new Promise((r) => child.once("exit", r));
      }
      await rm(root, { recursive: true, force: true });
    },
  };
}
