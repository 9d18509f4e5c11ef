/**
 * Redirects of xrootd servers, followed by us, one hop at a time, each through the destination
 * policy. The user names the `root://` server (or their Rucio server picks it), so a redirect is
 * as untrusted as the URL itself: it may point at a local file (`file://localhost/…` or a bare
 * `/path`, which the xrootd client opens itself), at stdio (`-`), or at an address the policy
 * refuses (loopback, the site's private networks, the CE's own listeners).
 *
 * The xrootd client (XrdCl 5.5) has no setting that refuses local redirects: a `kXR_redirect` to a
 * `file://localhost` URL goes to its local file handler (XrdClXRootDMsgHandler.cc,
 * HandleLocalRedirect). What it has is a redirect budget, checked before any redirect is acted on
 * (`XRD_REDIRECTLIMIT`, "Redirect limit has been reached"). With a budget of 0 the tool follows no
 * redirect at all, and its Dump-level log of the XRootD topic names the target it was sent to
 * ("Got kXR_redirect response to message …: <host or URL>, port <n>"). We read that line from the
 * tool's stderr (a pipe we hold), check the target, and run the tool again against the checked
 * address. A target never connects before it passed the policy.
 *
 * Metalinks are the other way XrdCl opens what a server names (a `.meta4` reply may list
 * `file://` replicas): their processing is off.
 */
import type { ResultPromise } from "execa";
import { redact, TransferError, type TransferClient } from "../http.js";

/** Redirects followed for one transfer (XrdCl's own default is 16). */
export const MAX_HOPS = 8;

/**
 * Client settings of every xrootd tool run: no redirect followed by the tool itself, no metalink
 * processing, and a log that names redirect targets (XRootD topic at Dump level only; other topics
 * at Error, as before).
 */
export const XRD_CLIENT_ENV: Readonly<Record<string, string>> = {
  XRD_REDIRECTLIMIT: "0",
  XRD_METALINKPROCESSING: "0",
  XRD_LOCALMETALINKFILE: "0",
  XRD_LOGLEVEL: "Dump",
  XRD_LOGMASK_DUMP: "XRootDMsg",
  XRD_LOGMASK_DEBUG: "None",
  XRD_LOGMASK_INFO: "None",
  XRD_LOGMASK_WARNING: "None",
};

/** One server to run the tool against: the URL as named and the URL with the checked address. */
export interface Hop {
  /** With the host name (what errors and the GSI host check name). */
  url: string;
  /** With the address the policy allowed (what the tool connects to). */
  wire: string;
  /** GSI checks the server's certificate against the name, not the address. */
  env: Record<string, string>;
}

/** The URL with its host replaced by the one address the policy allows (resolved once); final refusal otherwise. */
export async function pinHop(client: TransferClient, url: string, via?: string): Promise<Hop> {
  const u = new URL(url);
  const name = u.hostname.replace(/^\[|\]$/g, "");
  if (!client.policy) return { url, wire: url, env: { XrdSecGSISRVNAMES: name } };
  try {
    const { address, family } = await client.policy.resolve(name, Number(u.port) || 1094);
    u.hostname = family === 6 ? `[${address}]` : address;
  } catch (e) {
    const why = (e as Error).message;
    throw new TransferError(via ? `${via} redirected to ${redact(url)}, refused: ${why}` : why, false);
  }
  return { url, wire: u.toString(), env: { XrdSecGSISRVNAMES: name } };
}

const HOST_RE =
  /^(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}[A-Za-z0-9])?)*|\[[0-9A-Fa-f:.]+\])$/;
const REDIRECT_RE = /Got kXR_redirect response to message .*: (.*), port (-?\d+)$/;

/** A redirect target as the tool logged it: `info` is a host, `host?cgi`, or a URL. */
export interface Redirect {
  info: string;
  port: number;
}

/**
 * The next server after `from` redirected to `r`, or a final refusal naming what was refused.
 * Only `root://`/`roots://` servers by host name or address are followed; the path is the one
 * asked for, the redirect's CGI (tokens of dCache doors and the like) goes along.
 */
export function nextHop(from: string, r: Redirect): string {
  const src = new URL(from);
  const shown = `${r.info.slice(0, 200)}${r.port > 0 ? `, port ${r.port}` : ""}`;
  const refuse = (why: string) =>
    new TransferError(`${redact(from)} redirected to ${JSON.stringify(shown)}, refused: ${why}`, false, 403, "XROOTD_REDIRECT_REFUSED");
  const [head = "", ...rest] = r.info.split("?");
  const cgi = rest.join("?");
  let host: string;
  let port = r.port;
  let scheme = src.protocol;
  if (head.includes("://")) {
    let u: URL;
    try {
      u = new URL(head);
    } catch {
      throw refuse("not a URL");
    }
    if (u.protocol === "file:") throw refuse("a local file (file://) is never opened for a remote server");
    if (!["root:", "roots:", "xroot:", "xroots:"].includes(u.protocol))
      throw refuse(`only root:// and roots:// redirects are followed, not ${u.protocol}//`);
    if (src.protocol === "roots:" && !u.protocol.endsWith("s:")) throw refuse("a roots:// transfer does not continue without TLS");
    scheme = u.protocol.startsWith("x") ? u.protocol.slice(1) : u.protocol;
    host = u.hostname;
    if (u.port) port = Number(u.port);
  } else {
    if (head.startsWith("/")) throw refuse("a local file is never opened for a remote server");
    if (head.startsWith("-")) throw refuse("the client's standard input/output is no redirect target");
    host = head;
  }
  if (!HOST_RE.test(host)) throw refuse("not a host name or address");
  if (!(port > 0 && port < 65536)) throw refuse("no port");
  const next = new URL(`${scheme}//${host.includes(":") && !host.startsWith("[") ? `[${host}]` : host}:${port}`);
  next.pathname = src.pathname;
  next.search = cgi ? `?${cgi}` : src.search;
  return next.toString();
}

/** What stderr said: the last redirect the tool logged, and its last lines that are not Dump log lines. */
export interface ToolOutput {
  redirect?: Redirect | undefined;
  /** The last few non-log lines (the tool's own error), bounded. */
  tail: string;
}

const LINE_MAX = 16 * 1024;
const TAIL_LINES = 8;

/** Reads a tool's stderr as it comes (Dump logs of a large transfer are not kept whole). */
export function readToolStderr(proc: ResultPromise): Promise<ToolOutput> {
  return new Promise((resolve) => {
    const out: ToolOutput = { tail: "" };
    const tail: string[] = [];
    let partial = "";
    const line = (l: string) => {
      const m = REDIRECT_RE.exec(l);
      if (m) out.redirect = { info: m[1]!, port: Number(m[2]) };
      else if (!/^\[\d{4}-\d\d-\d\d [^\]]*\]\[Dump/.test(l) && l.trim() !== "") {
        tail.push(l.slice(0, 2000));
        if (tail.length > TAIL_LINES) tail.shift();
      }
    };
    const stderr = proc.stderr;
    if (!stderr) return resolve(out);
    stderr.setEncoding("utf8");
    stderr.on("data", (chunk: string) => {
      const parts = (partial + chunk).split("\n");
      partial = parts.pop()!.slice(0, LINE_MAX);
      for (const p of parts) line(p);
    });
    stderr.on("close", () => {
      if (partial) line(partial);
      out.tail = tail.join("\n");
      resolve(out);
    });
  });
}

/** One run against one server: done, or redirected (nothing of it kept). */
export type HopResult<T> = { done: T } | { redirect: Redirect };

/**
 * Runs `attempt` against the named server, then against each server it is redirected to, each
 * target checked first (nextHop, the destination policy), at most MAX_HOPS redirects.
 */
export async function followRedirects<T>(client: TransferClient, given: string, attempt: (hop: Hop) => Promise<HopResult<T>>): Promise<T> {
  let hop = await pinHop(client, given);
  for (let n = 0; ; n++) {
    const r = await attempt(hop);
    if ("done" in r) return r.done;
    if (n >= MAX_HOPS) throw new TransferError(`${redact(given)}: more than ${MAX_HOPS} redirects`, false);
    hop = await pinHop(client, nextHop(hop.url, r.redirect), redact(hop.url));
  }
}
