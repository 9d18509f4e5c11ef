/**
 * The whole gateway over real TLS (client certificate proxies) and real Redis: random methods,
 * paths under /rest/1.0 and /rest/1.1 (a real job's session and diagnose files, a real delegation),
 * action=… and other query strings, Content-Type/Accept/Range/Content-Range headers, and bodies
 * from the other targets' arbitraries; one in five requests goes over a raw socket with an
 * arbitrary request target. Property: no 5xx but the documented 503, every 4xx carries its reason
 * (status text and X-Error-Code), the gateway keeps answering, and its live heap (after full
 * collections) and RSS stay bounded.
 */
import { connect as tlsConnect } from "node:tls";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { startTestGateway, XRSL, type CredName, type TestGateway } from "../../apps/gateway/test/harness.js";
import { fc, fuzz } from "@ce/testing/fuzz";
import { idListBody, mutated, rawText, wellFormedOrBroken } from "./arbitraries.js";

let t: TestGateway;
let jobId = "";
let delegationId = "";
let pem = "";

beforeAll(async () => {
  t = await startTestGateway(inject("redisUrl"), {
    gateway: { limits: { idsPerRequest: 50, idListBytes: 64 * 1024, delegationBytes: 64 * 1024 } },
  });
  const r = await t.request("POST", `${t.rest}/1.1/jobs?action=new`, {
    body: XRSL("fuzz", '(inputfiles=("in.txt" ""))'),
    accept: "application/json",
  });
  jobId = r.json().job[0].id;
  await t.request("PUT", `${t.rest}/1.1/jobs/${jobId}/session/in.txt`, { body: "0123456789" });
  const d = await t.request("POST", `${t.rest}/1.1/delegations?action=new`);
  delegationId = String(d.headers.location).split("/").pop() ?? "";
  pem = t.pki.creds.alice!.cert;
});
afterAll(async () => t?.close());

/** Anything outside printable ASCII is percent-encoded byte by byte (what a client can put on the wire). */
const wire = (s: string) =>
  [...Buffer.from(s, "utf8")].map((b) => (b > 0x20 && b < 0x7f ? String.fromCharCode(b) : `%${b.toString(16).padStart(2, "0")}`)).join("");
const headerSafe = (s: string) => s.replace(/[^\t\x20-\x7e]/g, "").slice(0, 200);

const seg = fc.oneof(
  fc.constantFrom("..", ".", "", "%2e%2e", "%2f", "%00", "%c0%ae", "in.txt", "out", "a b", "~", "%", "%zz", "\\", "x".repeat(300)),
  fc.stringMatching(/^[A-Za-z0-9._-]{1,10}$/),
  fc.string({ unit: "binary", maxLength: 5 }),
);
const rel = fc
  .array(fc.tuple(fc.constantFrom("/", "//", "/../", "/./"), seg), { maxLength: 5 })
  .map((ps) => ps.map(([a, b]) => a + b).join(""));
const tail = fc.oneof(
  { arbitrary: fc.constantFrom("", "info", "jobs", "delegations", "nope"), weight: 4 },
  {
    arbitrary: fc
      .constantFrom(
        () => jobId,
        () => "0b7e2c1a-9f3d-4e2b-8c1d-2a3b4c5d6e7f",
      )
      .map((f) => `jobs/${f()}`),
    weight: 1,
  },
  { arbitrary: rel.map((r) => `jobs/${jobId}/session${r}`), weight: 4 },
  {
    arbitrary: fc.constantFrom("errors", "status", "description", "failed", "..", "%2e%2e/x").map((f) => `jobs/${jobId}/diagnose/${f}`),
    weight: 2,
  },
  { arbitrary: fc.constantFrom("", "/x", "/..").map((s) => `delegations/${delegationId}${s}`), weight: 2 },
  { arbitrary: rel, weight: 1 },
);
const query = fc.oneof(
  fc.constant(""),
  fc
    .constantFrom("new", "info", "status", "kill", "clean", "restart", "delegations", "get", "renew", "delete", "", "NEW", "%00")
    .map((a) => `?action=${a}`),
  fc
    .constantFrom(
      "state=RUNNING,Bogus",
      "instances=0",
      "instances=99999999999",
      "instances=2&instances_min=3",
      "type=jwt",
      "type=x",
      "delegation_id=zz",
      "queue=%00",
    )
    .map((q) => `?${q}`),
  rawText.map((q) => `?${q}`),
);
const version = fc.oneof({ arbitrary: fc.constantFrom("1.0", "1.1"), weight: 8 }, { arbitrary: fc.constantFrom("2.0", ""), weight: 1 });
const path = fc.tuple(version, tail, query).map(([v, tl, q]) => wire(`${t.rest}/${v}${v ? "/" : ""}${tl}${q}`).replace(/^\/+/, "/"));

const ids = fc.array(fc.oneof(fc.constant("JOB"), fc.uuid(), fc.string({ maxLength: 8 })), { maxLength: 60 });
const body = fc.oneof(
  fc.constant(undefined),
  ids.map((l) => `<jobs>${l.map((i) => `<job><id>${i}</id></job>`).join("")}</jobs>`),
  ids.map((l) => JSON.stringify({ job: l.map((id) => ({ id })) })),
  idListBody,
  wellFormedOrBroken(fc.constant(XRSL("f"))),
  fc.constant("PEM"),
  mutated(fc.constant("PEM")),
  fc.integer({ min: 0, max: 64 * 1024 + 16 }).map((n) => "x".repeat(n)),
  rawText,
);
const ctype = fc.oneof(
  fc.constantFrom(
    undefined,
    "application/json",
    "application/xml",
    "application/rsl",
    "text/plain",
    "application/x-pem-file",
    "multipart/form-data; boundary=x",
    "image/png",
  ),
  rawText.map(headerSafe),
);
const accept = fc.constantFrom(
  undefined,
  "application/json",
  "application/xml",
  "text/html",
  "*/*",
  "image/png",
  "application/json;q=0, text/xml",
);
const range = fc.oneof(
  fc.constant(undefined),
  fc.tuple(fc.nat(20), fc.nat(20)).map(([a, b]) => `bytes=${a}-${b}`),
  fc.constantFrom("bytes=-3", "bytes=5-", "bytes=0-1,3-4", "bytes=9-2", "bytes=99999999999999999999-", "items=0-1", "bytes="),
  rawText.map(headerSafe),
);
const contentRange = fc.oneof(
  fc.constant(undefined),
  fc.tuple(fc.nat(20), fc.nat(20), fc.nat(40)).map(([a, b, c]) => `bytes ${a}-${b}/${c}`),
  fc.constantFrom("bytes */10", "bytes 0-0/*", "bytes 5-2/10", "bytes 0-99999999999999999999/*"),
  rawText.map(headerSafe),
);
/** Methods Node's HTTP parser passes on; the raw requests add ones it refuses itself. */
const method = fc.oneof(
  { arbitrary: fc.constantFrom("GET", "POST", "PUT"), weight: 6 },
  { arbitrary: fc.constantFrom("HEAD", "DELETE", "PROPFIND", "OPTIONS", "PATCH", "MKCOL", "MOVE"), weight: 3 },
);
const rawMethod = fc.oneof(method, fc.constantFrom("FOO", "get", "G\tET", ""));
const as = fc.constantFrom<CredName>("alice", "alice", "alice", "alice", "alice", "alice", "bob", "none");

const structured = fc.record({
  method,
  path,
  body,
  ctype,
  accept,
  range,
  contentRange,
  as,
  depth: fc.constantFrom(undefined, "0", "1", "infinity", "x"),
});
/** A request line a normal client would never build: raw bytes in the target, odd versions. */
const rawRequest = fc
  .tuple(
    rawMethod,
    fc.oneof(
      path,
      rawText.map((s) => `${t.rest}/1.1/jobs/${jobId}/session/${s.replace(/[\r\n ]/g, "")}`),
    ),
    fc.constantFrom("HTTP/1.1", "HTTP/1.0", "HTTP/2.0", ""),
  )
  .map(([m, p, v]) => `${m} ${p} ${v}\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n`);

function rawExchange(text: string, as: CredName): Promise<{ status: number; head: string }> {
  return new Promise((resolve, reject) => {
    const c = t.pki.creds[as];
    const sock = tlsConnect(
      { host: "127.0.0.1", port: t.gw.port, rejectUnauthorized: false, ...(c ? { cert: c.cert, key: c.key } : {}) },
      () => sock.end(text),
    );
    let buf = "";
    const done = () => {
      const head = buf.slice(0, Math.max(0, buf.indexOf("\r\n\r\n")));
      resolve({ status: Number(head.split(" ")[1] ?? 0), head });
    };
    sock.on("data", (d) => (buf += d.toString("latin1")));
    sock.on("end", done);
    sock.on("close", done);
    sock.on("error", (e) => (buf ? done() : reject(e)));
  });
}

const within = <T>(p: Promise<T>, ms: number, what: string) =>
  Promise.race([p, new Promise<never>((_, rej) => setTimeout(() => rej(new Error(`no answer within ${ms} ms: ${what}`)), ms).unref())]);

describe("fuzz: whole gateway over HTTPS", () => {
  it("no 5xx but 503, every 4xx with a reason, the gateway keeps answering with bounded memory", async () => {
    // Memory is compared after full collections: without a heap limit V8 lets garbage pile up
    // (100,000 requests grew RSS by ~600 MiB of garbage while the live heap stayed flat).
    setFlagsFromString("--expose-gc");
    const gc = runInNewContext("gc") as () => void;
    gc();
    const heap0 = process.memoryUsage().heapUsed;
    const seen = new Map<number, number>();
    await fuzz(
      "http",
      fc.oneof(
        { arbitrary: structured.map((r) => ({ kind: "req" as const, r })), weight: 4 },
        { arbitrary: fc.tuple(rawRequest, as).map(([text, who]) => ({ kind: "raw" as const, text, who })), weight: 1 },
      ),
      async (c) => {
        if (c.kind === "raw") {
          const res = await within(rawExchange(c.text, c.who), 10_000, JSON.stringify(c.text));
          if (res.status >= 500 && res.status !== 503) throw new Error(`5xx: ${JSON.stringify(c.text)} → ${res.head}`);
          // Requests Node's HTTP parser refuses (bad method, target or version) get its bare 400
          // and a closed connection; everything the gateway answers carries X-Error-Code.
          if (
            res.status >= 400 &&
            !/^x-error-code: [A-Z_0-9]+$/im.test(res.head) &&
            !/^HTTP\/1\.1 400 Bad Request\r\nConnection: close/.test(res.head)
          ) {
            throw new Error(`4xx without a reason: ${JSON.stringify(c.text)} → ${res.head}`);
          }
          return;
        }
        const { r } = c;
        const headers: Record<string, string> = {};
        if (r.ctype !== undefined) headers["content-type"] = r.ctype;
        if (r.range !== undefined) headers.range = r.range;
        if (r.contentRange !== undefined) headers["content-range"] = r.contentRange;
        if (r.depth !== undefined) headers.depth = r.depth;
        // "PEM" stands for the caller's certificate chain (known only once the gateway runs).
        const b = r.body?.replace(/JOB/g, jobId).replace(/PEM/g, pem);
        const res = await within(
          t.request(r.method, r.path, {
            as: r.as,
            ...(r.accept ? { accept: r.accept } : {}),
            headers,
            ...(b !== undefined ? { body: b } : {}),
          }),
          10_000,
          `${r.method} ${r.path}`,
        );
        seen.set(res.status, (seen.get(res.status) ?? 0) + 1);
        const what = `${r.method} ${r.path} → ${res.status} ${res.statusMessage} ${res.text.slice(0, 300)}`;
        if (res.status >= 500 && res.status !== 503) throw new Error(`5xx: ${what}`);
        if (res.status >= 400) {
          const code = res.headers["x-error-code"];
          if (typeof code !== "string" || !/^[A-Z_0-9]+$/.test(code)) throw new Error(`4xx without X-Error-Code: ${what}`);
          if (res.statusMessage.length <= 3) throw new Error(`4xx without a reason phrase: ${what}`);
          if (r.method !== "HEAD" && res.text.length === 0) throw new Error(`4xx without a body: ${what}`);
        }
      },
      100,
    );
    // The inputs reach the application, not only its front door: successes and varied refusals.
    const statuses = [...seen.keys()];
    if (process.env.CE_FUZZ_REPORT) console.log(`http statuses ${JSON.stringify(Object.fromEntries(seen))}`);
    expect(
      statuses.some((x) => x < 300),
      JSON.stringify([...seen]),
    ).toBe(true);
    // At least three kinds of refusal: a quick budget of 100 random cases sometimes meets only
    // 401/404/405 (a fresh-clone CI run did), so four was a coin toss, not a property.
    expect(statuses.filter((x) => x >= 400).length, JSON.stringify([...seen])).toBeGreaterThanOrEqual(3);
    const alive = await t.request("GET", `${t.rest}`, { accept: "application/json" });
    expect(alive.status).toBe(200);
    gc();
    const m = process.memoryUsage();
    const grown = (m.heapUsed - heap0) / 2 ** 20;
    expect(grown, `live heap grew by ${grown.toFixed(0)} MiB`).toBeLessThan(100);
    expect(m.rss / 2 ** 20, "RSS (MiB) after a full collection").toBeLessThan(768);
  }, 600_000);
});
