import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createCA, issueHostCert } from "@ce/x509/testing";
import { countGet } from "../bench/lib/count-get.js";

/**
 * The benchmark's counting GET (bench/lib/count-get.ts) parses HTTP/1.1 itself: it must count
 * exactly the body bytes whatever the framing a server picks (Content-Length, chunked with or
 * without trailers, close-delimited) and however the bytes are split across reads.
 */
const ca = createCA({ dn: "/DC=org/DC=cetest/CN=Count Get CA" });
const host = issueHostCert(ca, { hostnames: ["localhost"] });
let server: Server;
let port: number;

beforeAll(async () => {
  server = createServer({ cert: host.chainPem, key: host.keyPem }, (req, res) => {
    const q = new URL(req.url!, "https://localhost").searchParams;
    const size = Number(q.get("n"));
    const framing = q.get("framing");
    if (framing === "length") res.setHeader("content-length", size);
    if (framing === "trailer") res.addTrailers({ "x-sum": "1" });
    if (framing === "close") {
      // No Content-Length, no chunking: HTTP/1.0-style body ended by the connection.
      res.socket!.write("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n");
      res.socket!.end(Buffer.alloc(size, 3));
      return;
    }
    let sent = 0;
    let k = 1;
    const pump = () => {
      while (sent < size) {
        // Odd piece sizes: chunk headers and records fall anywhere in a read.
        const n = Math.min(size - sent, (k = (k * 7919) % 99_991) + 1);
        sent += n;
        if (!res.write(Buffer.alloc(n, 5))) return void res.once("drain", pump);
      }
      res.end();
    };
    pump();
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  port = (server.address() as AddressInfo).port;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));

describe("countGet", () => {
  const tls = { ca: ca.certPem, servername: "localhost" };
  for (const framing of ["length", "chunked", "trailer", "close"]) {
    it(`counts ${framing}-framed bodies exactly`, async () => {
      for (const n of [0, 1, 12_345, 3_000_001]) {
        // A small read buffer: the head and chunk boundaries straddle reads.
        const r = await countGet("127.0.0.1", port, `/f?framing=${framing}&n=${n}`, tls, 4096);
        expect(r).toEqual({ status: 200, bytes: n });
      }
    });
  }

  it("a server whose certificate does not verify is an error, not a count", async () => {
    await expect(countGet("127.0.0.1", port, "/f", { ...tls, servername: "other" })).rejects.toThrow();
  });
});
