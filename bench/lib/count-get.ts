/**
 * A GET whose body is counted and dropped, on its own TLS connection read into one reused buffer
 * (`onread`). Through `https.request` every 16 KiB TLS record became a fresh Buffer, a parser
 * callback and a stream event: the client cost ~1.4-1.9 CPU s per GiB, more than either server,
 * so a 1 GiB download measured the client. This reads the same bytes for ~0.7 CPU s per GiB.
 * HTTP/1.1 with `Connection: close`; the body is delimited by Content-Length, chunked encoding or
 * the end of the connection, whichever the server uses.
 */
import { connect, type ConnectionOptions } from "node:tls";

export interface CountGetResult {
  status: number;
  bytes: number;
}

const MAX_HEAD = 64 * 1024;

/** Payload bytes of a chunked body, fed in pieces; `done` once the last chunk and trailers are read. */
class ChunkedCounter {
  bytes = 0;
  done = false;
  private state: "size" | "ext" | "sizeLf" | "data" | "dataCr" | "dataLf" | "trailer" = "size";
  private size = 0;
  private left = 0;
  private lineLen = 0;

  feed(b: Buffer, from: number, to: number): void {
    for (let i = from; i < to && !this.done; i++) {
      const c = b[i]!;
      switch (this.state) {
        case "size": {
          const d = c >= 48 && c <= 57 ? c - 48 : c >= 97 && c <= 102 ? c - 87 : c >= 65 && c <= 70 ? c - 55 : -1;
          if (d >= 0) this.size = this.size * 16 + d;
          else if (c === 13) this.state = "sizeLf";
          else if (c === 59 || c === 32 || c === 9) this.state = "ext";
          else throw new Error(`bad chunk size byte ${c}`);
          break;
        }
        case "ext":
          if (c === 13) this.state = "sizeLf";
          break;
        case "sizeLf":
          if (c !== 10) throw new Error("bad chunk size line");
          if (this.size === 0) {
            this.state = "trailer";
            this.lineLen = 0;
          } else {
            this.left = this.size;
            this.state = "data";
          }
          this.size = 0;
          break;
        case "data": {
          const n = Math.min(this.left, to - i);
          this.bytes += n;
          this.left -= n;
          i += n - 1;
          if (this.left === 0) this.state = "dataCr";
          break;
        }
        case "dataCr":
          if (c !== 13) throw new Error("chunk not followed by CRLF");
          this.state = "dataLf";
          break;
        case "dataLf":
          if (c !== 10) throw new Error("chunk not followed by CRLF");
          this.state = "size";
          break;
        case "trailer":
          // Trailer lines until an empty one; only its end matters.
          if (c === 10) {
            if (this.lineLen === 0) this.done = true;
            this.lineLen = 0;
          } else if (c !== 13) this.lineLen++;
          break;
      }
    }
  }
}

/** GET `path` from `host:port` over TLS with `tls` (credentials, CA, servername); counts the body. */
export function countGet(
  host: string,
  port: number,
  path: string,
  tls: ConnectionOptions,
  bufferBytes = 1024 * 1024,
): Promise<CountGetResult> {
  return new Promise((resolve, reject) => {
    let head: Buffer[] | undefined = [];
    let headLen = 0;
    let status = 0;
    let length: number | undefined;
    let chunked: ChunkedCounter | undefined;
    let bytes = 0;
    let settled = false;
    const finish = (err?: Error) => {
      if (settled) return;
      settled = true;
      socket.destroy();
      if (err) reject(err);
      else resolve({ status, bytes: chunked ? chunked.bytes : bytes });
    };
    const body = (b: Buffer, from: number, to: number) => {
      if (chunked) {
        chunked.feed(b, from, to);
        if (chunked.done) finish();
      } else {
        bytes += to - from;
        if (length !== undefined && bytes >= length)
          finish(bytes > length ? new Error(`body longer than Content-Length ${length}`) : undefined);
      }
    };
    const onHead = (all: Buffer, end: number) => {
      const lines = all.subarray(0, end).toString("latin1").split("\r\n");
      const m = /^HTTP\/1\.[01] (\d{3})/.exec(lines[0] ?? "");
      if (!m) throw new Error(`not an HTTP/1.1 response: ${JSON.stringify(lines[0])}`);
      status = Number(m[1]);
      for (const line of lines.slice(1)) {
        const i = line.indexOf(":");
        const name = line.slice(0, i).trim().toLowerCase();
        const value = line.slice(i + 1).trim();
        if (name === "content-length") length = Number(value);
        else if (name === "transfer-encoding" && /chunked/i.test(value)) chunked = new ChunkedCounter();
      }
      if (chunked) length = undefined;
      if (length === 0 || status === 204 || status === 304) finish();
    };
    const socket = connect({
      ...tls,
      host,
      port,
      onread: {
        buffer: Buffer.allocUnsafe(bufferBytes),
        callback: (n: number, buf: Uint8Array) => {
          if (settled) return false;
          const b = Buffer.from(buf.buffer, buf.byteOffset, n);
          try {
            if (!head) {
              body(b, 0, n);
              return true;
            }
            // The head is copied out: the read buffer is reused by the next read.
            head.push(Buffer.from(b));
            headLen += n;
            const all = Buffer.concat(head);
            const end = all.indexOf("\r\n\r\n");
            if (end < 0) {
              if (headLen > MAX_HEAD) throw new Error("response head over 64 KiB");
              return true;
            }
            head = undefined;
            onHead(all, end);
            if (!settled && end + 4 < all.length) body(all, end + 4, all.length);
          } catch (e) {
            finish(e as Error);
            return false;
          }
          return true;
        },
      },
    } as ConnectionOptions);
    socket.once("secureConnect", () =>
      socket.write(`GET ${path} HTTP/1.1\r\nHost: ${host}:${port}\r\nAccept: */*\r\nConnection: close\r\n\r\n`),
    );
    socket.once("error", (e) => finish(e));
    socket.once("end", () => {
      if (head) return finish(new Error("connection closed before the response head"));
      if (chunked && !chunked.done) return finish(new Error("connection closed inside a chunked body"));
      if (length !== undefined && bytes < length) return finish(new Error(`connection closed after ${bytes} of ${length} bytes`));
      finish();
    });
    socket.once("close", () => finish(new Error("connection closed")));
  });
}
