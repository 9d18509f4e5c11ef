import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { mkdtemp, open, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { redact, TransferError, transferClient, upload } from "./http.js";

describe("redact (URLs in job logs)", () => {
  it("drops user info and the query", () => {
    expect(redact("https://u:pw@se.example.org:8443/data/f?authz=secret")).toBe("https://se.example.org:8443/data/f");
  });

  it("names an ARC URL with options after the host, without the options (they may hold keys)", () => {
    expect(redact("https://127.0.0.1:8443;failureallowed=yes/token/f.txt")).toBe("https://127.0.0.1:8443/token/f.txt");
    expect(redact("rucio://rucio.example.org;failureallowed=yes/objectstores/s3+rucio://os.example.org:443/OS/write")).toBe(
      "rucio://rucio.example.org/objectstores/s3+rucio://os.example.org:443/OS/write",
    );
    expect(redact("s3://os.example.org;s3_secret_key=abc/b/k")).toBe("s3://os.example.org/b/k");
    // A malformed option list is dropped as well.
    expect(redact("davs://se.example.org:443;junk/f")).toBe("davs://se.example.org:443/f");
  });

  it("keeps the pilot's checksum metadata at the end of the path", () => {
    expect(redact("davs://se.example.org:443/a/f:checksumtype=adler32:checksumvalue=0badc0de")).toBe(
      "davs://se.example.org:443/a/f:checksumtype=adler32:checksumvalue=0badc0de",
    );
  });

  it("says so for what is no URL", () => {
    expect(redact("not a url")).toBe("<invalid URL>");
  });
});

describe("MKCOL refused by a hostile or broken storage server", () => {
  // A plain loopback HTTP server: every PUT is 409 (no parent), every MKCOL 403; PROPFIND answers
  // as the test says. Only a collection the server really reports lets the upload go on.
  async function server(propfind: (res: ServerResponse) => void): Promise<{ url: string; close(): Promise<void>; puts: () => number }> {
    let puts = 0;
    const s = createServer((req, res) => {
      req.resume();
      if (req.method === "PUT") {
        puts++;
        res.writeHead(409).end();
      } else if (req.method === "MKCOL") res.writeHead(403).end();
      else if (req.method === "PROPFIND") propfind(res);
      else res.writeHead(405).end();
    });
    await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
    const { port } = s.address() as AddressInfo;
    return { url: `http://127.0.0.1:${port}`, puts: () => puts, close: () => new Promise((r) => s.close(() => r())) };
  }

  async function tryUpload(url: string): Promise<unknown> {
    const dir = await mkdtemp(join(tmpdir(), "http-mkcol-"));
    const client = transferClient(undefined, { connectTimeoutMs: 2_000, idleTimeoutMs: 5_000 });
    await writeFile(join(dir, "f"), "x\n");
    const handle = await open(join(dir, "f"));
    try {
      await upload(client, { handle, size: 2 }, `${url}/a/f`, { signal: new AbortController().signal });
      return undefined;
    } catch (e) {
      return e;
    } finally {
      await handle.close();
      await client.close();
      await rm(dir, { recursive: true, force: true });
    }
  }

  const multistatus = (prop: string) =>
    `<?xml version="1.0"?><D:multistatus xmlns:D="DAV:"><D:response><D:href>/a/</D:href><D:propstat><D:prop>${prop}</D:prop></D:propstat></D:response></D:multistatus>`;

  it.each([
    ["no such collection (404)", (res: ServerResponse) => res.writeHead(404).end()],
    ["a plain file, not a collection", (res: ServerResponse) => res.writeHead(207).end(multistatus("<D:resourcetype/>"))],
    [
      "an answer past the cap, however it ends",
      (res: ServerResponse) =>
        res.writeHead(207).end(`${" ".repeat(1 << 20)}${multistatus("<D:resourcetype><D:collection/></D:resourcetype>")}`),
    ],
  ])("fails naming the MKCOL when PROPFIND shows %s", async (_what, propfind) => {
    const srv = await server(propfind);
    try {
      const e = (await tryUpload(srv.url)) as Error;
      expect(e).toBeInstanceOf(TransferError);
      expect(e.message).toMatch(/MKCOL http:\/\/127\.0\.0\.1:\d+\/a\/: HTTP 403/);
      expect(srv.puts()).toBe(1); // never PUT again into what is not there
    } finally {
      await srv.close();
    }
  });

  it("goes on when the collection exists after all (another upload made it)", async () => {
    const srv = await server((res) => res.writeHead(207).end(multistatus("<D:resourcetype><D:collection/></D:resourcetype>")));
    try {
      const e = (await tryUpload(srv.url)) as Error;
      // The second PUT is the server's to refuse (409 again here): the MKCOL no longer fails the file.
      expect(e.message).toMatch(/^PUT http:\/\/127\.0\.0\.1:\d+\/a\/f: HTTP 409/);
      expect(srv.puts()).toBe(2);
    } finally {
      await srv.close();
    }
  });
});
