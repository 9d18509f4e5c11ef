/**
 * What xrdcp/xrdfs get to authenticate with: the job's credential and nothing else.
 *
 * xrdcp runs as the job's mapped account (tools.ts), or as the JEM itself when it is not root
 * (developer mode). Left to itself, the xrootd client would look for that user's own credentials
 * (`/tmp/x509up_u<uid>`, `~/.globus/usercert.pem`, `/tmp/bt_u<uid>`) and could present another
 * identity on a job's behalf. So every run gets a private environment:
 *   - `XrdSecPROTOCOL` names the one protocol the job's credential is for (`gsi` for a proxy,
 *     `ztn` for a token); a job without a credential gets `gsi` with no files, which fails where
 *     the server wants authentication and is unused where it does not;
 *   - `X509_USER_PROXY`, `X509_USER_CERT`, `X509_USER_KEY`, `BEARER_TOKEN_FILE`, `HOME` and
 *     `XDG_RUNTIME_DIR` point into a 0700 directory of this transfer owned by the account (the
 *     proxy or the token written there 0600, the rest absent), removed afterwards by descriptor;
 *   - `X509_CERT_DIR` is the trust the site gives storage endpoints (certDir below).
 * Tokens go only to their audience (xrootdTokenRefusal); ztn itself sends a token over TLS only.
 */
import { execFile } from "node:child_process";
import { rmSync } from "node:fs";
import { chmod, mkdtemp, readdir, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { tokenAudiences, WLCG_ANY_AUDIENCE } from "../../credentials.js";
import { redact, TransferError, type TransferClient } from "../http.js";
import { ToolRefused } from "../tools.js";

const PEM_RE = /-----BEGIN ([A-Z ]+)-----[\s\S]+?-----END \1-----\n?/g;
const run = promisify(execFile);

export interface XrdCredentialEnv {
  env: Record<string, string>;
  /** What the server is given, for the reason of an authentication failure. */
  presents: string;
  cleanup: () => Promise<void>;
}

const DEFAULT_PORT: Record<string, string> = { "root:": "1094", "roots:": "1094", "https:": "443", "davs:": "443" };

/** `host:port` of a URL of a scheme a token for xrootd may name; undefined for any other. */
function endpoint(u: string): string | undefined {
  try {
    const url = new URL(u);
    const port = url.port || DEFAULT_PORT[url.protocol];
    return port ? `${url.hostname.toLowerCase()}:${port}` : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Why a token must not be sent to the xrootd endpoint `url` (undefined = it may). Audiences name
 * storage endpoints in the forms WLCG sites use (`roots://host:port`, `root://host:port`, or the
 * same host and port as `https://`/`davs://`); the WLCG any-audience only when the site allows it.
 */
export function xrootdTokenRefusal(token: string, url: string, allowAny: boolean): string | undefined {
  const target = endpoint(url);
  if (!target) return `${url.split(":")[0]} is not an xrootd URL`;
  const auds = tokenAudiences(token);
  if (!auds || auds.length === 0) return "the token names no audience (aud)";
  if (auds.includes(WLCG_ANY_AUDIENCE)) {
    if (allowAny) return undefined;
    if (auds.length === 1)
      return "the token's audience is the WLCG any-audience, which this CE does not accept (staging.allowAnyAudienceTokens)";
  }
  if (auds.some((a) => a !== WLCG_ANY_AUDIENCE && endpoint(a) === target)) return undefined;
  return `the endpoint ${target} is not the token's audience (${auds.join(", ")})`;
}

/**
 * Environment for the xrdcp/xrdfs runs of one transfer against `url` with the client's
 * credential. The files are written while the directory is still root's, then the directory is
 * handed to the account the tools run as (tools.ts): nothing is written into it by path afterwards.
 */
export async function xrdCredentialEnv(client: TransferClient, url: string): Promise<XrdCredentialEnv> {
  const cred = client.credential;
  if (cred?.type === "jwt") {
    const refused = xrootdTokenRefusal(cred.token, url, client.allowAnyAudience ?? false);
    if (refused) throw new TransferError(`token not sent to ${redact(url)}: ${refused}`, false);
  }
  let priv;
  try {
    priv = await client.tools.privateDir();
  } catch (e) {
    if (e instanceof ToolRefused) throw new TransferError(`${redact(url)}: ${e.message}`, false, undefined, e.code);
    throw e;
  }
  const dir = priv.path;
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? "/usr/bin:/bin",
    HOME: dir,
    XDG_RUNTIME_DIR: dir,
    X509_USER_PROXY: join(dir, "proxy"),
    X509_USER_CERT: join(dir, "usercert.pem"),
    X509_USER_KEY: join(dir, "userkey.pem"),
    BEARER_TOKEN_FILE: join(dir, "token"),
    XrdSecPROTOCOL: cred?.type === "jwt" ? "ztn" : "gsi",
    ...(client.certDir ? { X509_CERT_DIR: client.certDir } : {}),
  };
  const cleanup = () => priv.cleanup();
  try {
    let presents = "no credential (the job delegated none)";
    if (cred?.type === "x509") {
      const blocks = [...cred.proxyPem.matchAll(PEM_RE)].map((b) => b[0]);
      // Proxy file layout: certificate, key, then the rest of the chain.
      const cert = blocks.filter((b) => b.includes("CERTIFICATE"));
      const key = blocks.find((b) => b.includes("PRIVATE KEY")) ?? "";
      await priv.write("proxy", [cert[0] ?? "", key, ...cert.slice(1)].join(""));
      presents = "the job's X.509 proxy (GSI)";
    } else if (cred?.type === "jwt") {
      await priv.write("token", `${cred.token}\n`);
      presents = "the job's token (ztn)";
    }
    await priv.seal();
    return { env, presents, cleanup };
  } catch (e) {
    await cleanup();
    throw e;
  }
}

/** Combined CA directories of this process, removed when it exits (one listener for all). */
const builtDirs = new Set<string>();

/**
 * The CA directory xrootd clients verify servers with: the site's CA directory (`auth.caDir`,
 * the grid trust anchors), plus the certificates of `staging.caFile` when one is set (added to,
 * not substituted for, as for https). The combined directory is private to this process.
 */
export async function xrootdCertDir(caDir: string, caPem: string | undefined): Promise<string> {
  if (!caPem) return caDir;
  const dir = await mkdtemp(join(tmpdir(), "ce-xrd-ca-"));
  // Read by the tools, which run as the jobs' accounts: public certificates only.
  await chmod(dir, 0o755);
  if (builtDirs.size === 0) process.once("exit", () => builtDirs.forEach((d) => rmSync(d, { recursive: true, force: true })));
  builtDirs.add(dir);
  const taken = new Set<string>();
  for (const name of await readdir(caDir).catch(() => [] as string[])) {
    taken.add(name);
    await symlink(join(caDir, name), join(dir, name));
  }
  for (const m of caPem.matchAll(PEM_RE)) {
    if (m[1] !== "CERTIFICATE") continue;
    const pem = m[0];
    const hash = await subjectHash(pem);
    let n = 0;
    while (taken.has(`${hash}.${n}`)) n++;
    taken.add(`${hash}.${n}`);
    await writeFile(join(dir, `${hash}.${n}`), pem, { mode: 0o644 });
  }
  return dir;
}

/** OpenSSL's subject hash, the file name xrootd looks a CA up by (`<hash>.0`). */
async function subjectHash(pem: string): Promise<string> {
  const tmp = await mkdtemp(join(tmpdir(), "ce-xrd-hash-"));
  try {
    await writeFile(join(tmp, "ca.pem"), pem);
    const { stdout } = await run("openssl", ["x509", "-hash", "-noout", "-in", join(tmp, "ca.pem")]);
    return stdout.trim();
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
}
