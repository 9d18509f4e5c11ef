/**
 * A hostile xrootd server for staging tests: it speaks just enough of the XRootD protocol
 * (handshake, kXR_protocol, kXR_login without authentication) to reach the request that matters,
 * and answers every open, stat, locate, mkdir and the like with a `kXR_redirect` to a target the
 * test sets: `file://localhost/<path>`, a bare `/path`, `root://127.0.0.1:<port>`...
 *
 * Why not the real xrootd-server (startXrootd): its `xrootd.redirect` directive sends clients to a
 * `host:port` only, and a cmsd manager redirects to the data servers that subscribed; neither can
 * be made to answer with a `file://` URL or a bare local path, which is what an attacker's server
 * sends. (Redirects to host:port with the real server are tested with startXrootd's `redirect`.)
 *
 * Wire format (XRootD protocol 5, all integers big-endian): the client opens with a 20-byte
 * handshake, the server answers an 8-byte body (protocol version, server type); every request is a
 * 24-byte header (streamid[2], requestid u16, 16 bytes of parameters, dlen i32) and dlen bytes;
 * every response is streamid[2], status u16, dlen i32 and the body. A redirect's body is the port
 * (i32) followed by the host or URL.
 */
import { createServer, type Server, type Socket } from "node:net";

export interface HostileXrootd {
  /** `root://localhost:<port>` */
  url: string;
  port: number;
  /** Where every request is sent: `info` as the redirect's host field, `port` (0 for a URL). */
  redirect: { info: string; port: number };
  /** Answer kXR_stat with a readable 17-byte file instead of a redirect (gets past the input cache's access check). */
  answerStat: boolean;
  /** Connections accepted so far. */
  connections: number;
  /** Request ids seen (kXR_open = 3010, kXR_stat = 3017, ...). */
  requests: number[];
  close(): Promise<void>;
}

const kXR_ok = 0;
const kXR_redirect = 4004;
const kXR_protocol = 3006;
const kXR_login = 3007;
const kXR_ping = 3011;
const kXR_close = 3003;
const kXR_endsess = 3023;
const kXR_stat = 3017;
const kXR_readable = 16;
const PROTOCOL_VERSION = 0x520;
const kXR_DataServer = 1;
const kXR_isServer = 1;

function response(streamid: Buffer, status: number, body: Buffer): Buffer {
  const h = Buffer.alloc(8);
  streamid.copy(h, 0, 0, 2);
  h.writeUInt16BE(status, 2);
  h.writeInt32BE(body.length, 4);
  return Buffer.concat([h, body]);
}

function serve(sock: Socket, s: HostileXrootd): void {
  let buf = Buffer.alloc(0);
  let shook = false;
  sock.on("error", () => undefined);
  sock.on("data", (chunk: Buffer) => {
    buf = Buffer.concat([buf, chunk]);
    if (!shook) {
      if (buf.length < 20) return;
      buf = buf.subarray(20);
      shook = true;
      const body = Buffer.alloc(8);
      body.writeInt32BE(PROTOCOL_VERSION, 0);
      body.writeInt32BE(kXR_DataServer, 4);
      sock.write(response(Buffer.alloc(2), kXR_ok, body));
    }
    while (buf.length >= 24) {
      const dlen = buf.readInt32BE(20);
      if (dlen < 0 || dlen > 1 << 20) return void sock.destroy();
      if (buf.length < 24 + dlen) return;
      const streamid = Buffer.from(buf.subarray(0, 2));
      const id = buf.readUInt16BE(2);
      buf = buf.subarray(24 + dlen);
      s.requests.push(id);
      if (id === kXR_protocol) {
        const body = Buffer.alloc(8);
        body.writeInt32BE(PROTOCOL_VERSION, 0);
        body.writeInt32BE(kXR_isServer, 4);
        sock.write(response(streamid, kXR_ok, body));
      } else if (id === kXR_login) {
        // A session id and no security section: no authentication asked for.
        sock.write(response(streamid, kXR_ok, Buffer.alloc(16, 7)));
      } else if (id === kXR_stat && s.answerStat) {
        // "<id> <size> <flags> <mtime>", NUL-terminated.
        sock.write(response(streamid, kXR_ok, Buffer.from(`1 17 ${kXR_readable} 1700000000\0`)));
      } else if (id === kXR_ping || id === kXR_close || id === kXR_endsess) {
        sock.write(response(streamid, kXR_ok, Buffer.alloc(0)));
      } else {
        const port = Buffer.alloc(4);
        port.writeInt32BE(s.redirect.port, 0);
        sock.write(response(streamid, kXR_redirect, Buffer.concat([port, Buffer.from(s.redirect.info)])));
      }
    }
  });
}

/** Starts the server on 127.0.0.1 (a kernel-chosen port), redirecting to `redirect`. */
export async function startHostileXrootd(redirect: { info: string; port: number }): Promise<HostileXrootd> {
  const sockets = new Set<Socket>();
  const state: HostileXrootd = {
    url: "",
    port: 0,
    redirect,
    answerStat: false,
    connections: 0,
    requests: [],
    close: () => Promise.resolve(),
  };
  const server: Server = createServer((sock) => {
    state.connections++;
    sockets.add(sock);
    sock.on("close", () => sockets.delete(sock));
    serve(sock, state);
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", resolve);
  });
  const addr = server.address();
  state.port = typeof addr === "object" && addr ? addr.port : 0;
  state.url = `root://localhost:${state.port}`;
  state.close = () =>
    new Promise<void>((resolve) => {
      for (const s of sockets) s.destroy();
      server.close(() => resolve());
    });
  return state;
}

/** A TCP listener on a loopback address that only counts who connects (a redirect must never reach it). */
export async function startCountingListener(
  host = "127.0.0.1",
): Promise<{ port: number; host: string; connections: () => number; close(): Promise<void> }> {
  let n = 0;
  const sockets = new Set<Socket>();
  const server = createServer((sock) => {
    n++;
    sockets.add(sock);
    sock.on("close", () => sockets.delete(sock));
    sock.on("error", () => undefined);
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, host, resolve);
  });
  const addr = server.address();
  return {
    port: typeof addr === "object" && addr ? addr.port : 0,
    host,
    connections: () => n,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
