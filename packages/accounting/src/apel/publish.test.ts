import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import type { TLSSocket } from "node:tls";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { accountingSchema } from "@ce/config";
import { AccountingDb } from "../db/index.js";
import { usageRecord } from "../record.js";
import { checkApelMessage } from "./loader-check.js";
import { parseMessage } from "./messages.js";
import { publishApel, type PublishOptions } from "./publish.js";

// Messages as APEL reads them, signed as APEL's sender signs (checked with `openssl smime -verify`
// against the test CA), sent to a stand-in ARGO endpoint on loopback.
let dir: string;
let db: AccountingDb;
let ca: string, cert: string, key: string;
const received: { url: string; apiKey: string | undefined; body: { messages: { attributes: Record<string, string>; data: string }[] } }[] =
  [];
let server: Server;
let port = 0;
// Stand-in for ARGO's authentication service: the AMS key for a client certificate the test CA signed.
let authn: Server;
let authnPort = 0;
const authnCalls: { authorized: boolean; cn: string | undefined; url: string }[] = [];
/** The key the authentication service gives now (rotating it makes the one cached before stale). */
let issued = "t1";
let rogueCert: string, rogueKey: string;

const ssl = (...args: string[]) => execFileSync("openssl", args, { cwd: dir, stdio: ["ignore", "pipe", "pipe"] }).toString();

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "apel-"));
  ssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/DC=test/CN=Test CA");
  ssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "host.key", "-out", "host.csr", "-subj", "/DC=test/CN=localhost");
  writeFileSync(
    join(dir, "ext"),
    "subjectAltName=DNS:localhost,IP:127.0.0.1\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth,clientAuth,emailProtection\n",
  );
  ssl(
    "x509",
    "-req",
    "-in",
    "host.csr",
    "-CA",
    "ca.pem",
    "-CAkey",
    "ca.key",
    "-CAcreateserial",
    "-out",
    "host.pem",
    "-days",
    "2",
    "-extfile",
    "ext",
  );
  [ca, cert, key] = ["ca.pem", "host.pem", "host.key"].map((f) => join(dir, f)) as [string, string, string];
  ssl(
    "req",
    "-x509",
    "-newkey",
    "rsa:2048",
    "-nodes",
    "-keyout",
    "rogue.key",
    "-out",
    "rogue.pem",
    "-days",
    "2",
    "-subj",
    "/DC=test/CN=localhost",
  );
  [rogueCert, rogueKey] = ["rogue.pem", "rogue.key"].map((f) => join(dir, f)) as [string, string];
  // Stand-in for the ARGO Messaging Service publish call (not the real service): answers one id per
  // message to the configured key or the one the authentication service gives now, else 401.
  server = createServer({ cert: readFileSync(cert), key: readFileSync(key) }, (req, res) => {
    let body = "";
    req.on("data", (c: Buffer) => (body += c.toString()));
    req.on("end", () => {
      const apiKey = req.headers["x-api-key"];
      if (apiKey !== "k1" && apiKey !== issued) {
        res
          .writeHead(401, { "content-type": "application/json" })
          .end(JSON.stringify({ error: { code: 401, message: "Unauthenticated", status: "UNAUTHENTICATED" } }));
        return;
      }
      const parsed = JSON.parse(body) as (typeof received)[number]["body"];
      received.push({ url: req.url ?? "", apiKey: req.headers["x-api-key"] as string | undefined, body: parsed });
      res
        .writeHead(200, { "content-type": "application/json" })
        .end(JSON.stringify({ messageIds: parsed.messages.map((_, i) => `m${received.length}-${i}`) }));
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  port = (server.address() as AddressInfo).port;
  authn = createServer(
    { cert: readFileSync(cert), key: readFileSync(key), ca: readFileSync(ca), requestCert: true, rejectUnauthorized: false },
    (req, res) => {
      const sock = req.socket as TLSSocket;
      const cn = sock.getPeerCertificate().subject?.CN;
      authnCalls.push({ authorized: sock.authorized, cn: typeof cn === "string" ? cn : undefined, url: req.url ?? "" });
      if (req.method !== "GET" || !sock.authorized)
        res
          .writeHead(401, { "content-type": "application/json" })
          .end(JSON.stringify({ error: { code: 401, message: "Unauthorized", status: "UNAUTHORIZED" } }));
      else res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ token: issued }));
    },
  );
  await new Promise<void>((r) => authn.listen(0, "127.0.0.1", r));
  authnPort = (authn.address() as AddressInfo).port;
});
afterAll(async () => {
  await new Promise((r) => server.close(r));
  await new Promise((r) => authn.close(r));
  rmSync(dir, { recursive: true, force: true });
});

// Noon on the 15th of last month (UTC): a past month, as APEL requires.
const now = new Date();
const end = Date.UTC(now.getUTCFullYear(), now.getUTCMonth() - 1, 15, 12);
const month = String(new Date(end).getUTCMonth() + 1),
  year = String(new Date(end).getUTCFullYear());
function entry(id: string, over: Record<string, string>) {
  return {
    id,
    recordId: `${id}/0`,
    owner: "/DC=test/CN=Alice",
    queue: "main",
    localId: `${id.length}00${id.slice(-1).charCodeAt(0)}`,
    created: String(end - 3_600_000),
    startedAt: String(end - 1_000_000),
    endedAt: String(end),
    usedWallSeconds: "1000",
    usedUserSeconds: "900",
    usedSystemSeconds: "50",
    usedCpuSeconds: "950",
    usedMemoryMB: "100",
    processors: "1",
    nodes: "wn1",
    outcome: "success",
    "u.benchmarkType": "HEPscore23",
    "u.benchmarkValue": "16.5",
    ...over,
  };
}

beforeEach(async () => {
  await db?.close();
  db = await AccountingDb.open(join(mkdtempSync(join(dir, "db-")), "a.db"), dir);
  const entries = [
    entry("voms1", {
      fqans: JSON.stringify(["/atlas/Role=production", "/atlas"]),
      localUser: JSON.stringify({ account: "atl001", uid: 5001 }),
    }),
    entry("voms2", { fqans: JSON.stringify(["/atlas/Role=production"]), endedAt: String(end + 60_000) }),
    entry("tok1", { owner: "https://iss.example/u1", fqans: JSON.stringify(["/cms/production"]) }),
    entry("plain1", { owner: "/DC=test/CN=Bob" }),
    // Never reached the batch system: recorded, not published.
    entry("prep1", { localId: "", startedAt: "", usedWallSeconds: "", outcome: "failed" }),
  ];
  await db.insert(entries.map((e, i) => ({ record: usageRecord(`1-${i}`, e, { vomslessVo: "vo.none" }), streamId: `1-${i}` })));
});

const opts = (messages: "individual" | "summaries" | "summaries-v0.3", extra: Partial<PublishOptions> = {}): PublishOptions => ({
  apel: { ...accountingSchema.parse({ apel: { messages, site: "TEST-SITE", targetUrl: `https://localhost:${port}`, batchSize: 2 } }).apel },
  site: { site: "TEST-SITE", submitHost: "https://ce.test/arex", machineName: "ce.test" },
  signer: { certFile: cert, keyFile: key },
  argo: { targetUrl: `https://localhost:${port}`, project: "accounting", topic: "gLite-APEL", token: "k1", ca: { file: ca } },
  ...extra,
});

/** `openssl smime -verify` against the test CA: the signed content, or a throw. */
const verify = (file: string) => ssl("smime", "-verify", "-CAfile", ca, "-in", file, "-text");

describe("APEL messages", () => {
  it("dry run: individual job records, signed, parse back to the database's values; the sync counts them", async () => {
    const out = join(dir, "dry-ind");
    const res = await publishApel(db, opts("individual", { outDir: out }));
    expect(res).toMatchObject({ messages: 3, records: 4 });
    const files = readdirSync(out).sort();
    expect(files).toEqual(["0001-individual.msg", "0002-individual.msg", "0003-sync.msg"]);
    const msgs = files.map((f) => parseMessage(verify(join(out, f))));
    for (const f of files) checkApelMessage(verify(join(out, f)), { strictVo: true });
    expect(msgs.map((m) => m.header)).toEqual([
      "APEL-individual-job-message: v0.3",
      "APEL-individual-job-message: v0.3",
      "APEL-sync-message: v0.1",
    ]);
    const recs = msgs.slice(0, 2).flatMap((m) => m.records);
    expect(recs).toHaveLength(4);
    const voms = recs.find((r) => r.GlobalUserName === "/DC=test/CN=Alice" && r.LocalUserId === "atl001")!;
    expect(voms).toEqual({
      Site: "TEST-SITE",
      SubmitHost: "https://ce.test/arex",
      MachineName: "ce.test",
      Queue: "main",
      LocalJobId: voms.LocalJobId,
      LocalUserId: "atl001",
      GlobalUserName: "/DC=test/CN=Alice",
      FQAN: "/atlas/Role=production",
      VO: "atlas",
      VOGroup: "/atlas",
      VORole: "Role=production",
      WallDuration: "1000",
      CpuDuration: "950",
      Processors: "1",
      NodeCount: "1",
      StartTime: String((end - 1_000_000) / 1000),
      EndTime: String(end / 1000),
      InfrastructureDescription: "APEL-CE-REST",
      InfrastructureType: "grid",
      MemoryReal: "102400",
      ServiceLevelType: "HEPscore23",
      ServiceLevel: "16.5",
    });
    const tok = recs.find((r) => r.GlobalUserName === "https://iss.example/u1")!;
    expect(tok).toMatchObject({ VO: "cms", VOGroup: "/cms/production", VORole: "Role=NULL" });
    expect(tok.FQAN).toBeUndefined();
    expect(recs.find((r) => r.GlobalUserName === "/DC=test/CN=Bob")).toMatchObject({ VO: "vo.none", VOGroup: "/vo.none" });
    expect(msgs[2]!.records).toEqual([
      { Site: "TEST-SITE", SubmitHost: "https://ce.test/arex", NumberOfJobs: "4", Month: month, Year: year },
    ]);
    // A dry run remembers nothing.
    expect((await publishApel(db, opts("individual", { outDir: join(dir, "dry-ind2") }))).records).toBe(4);
  });

  it("dry run: monthly summaries sum wall and CPU per VO group and role", async () => {
    const out = join(dir, "dry-sum");
    await publishApel(db, opts("summaries", { outDir: out }));
    const files = readdirSync(out).sort();
    const sums = files.filter((f) => f.includes("summary")).flatMap((f) => parseMessage(verify(join(out, f))).records);
    expect(parseMessage(verify(join(out, files[0]!))).header).toBe("APEL-summary-job-message: v0.2");
    const atlas = sums.find((s) => s.VO === "atlas" && s.GlobalUserName === "/DC=test/CN=Alice")!;
    expect(atlas).toMatchObject({
      Month: month,
      Year: year,
      VOGroup: "/atlas",
      VORole: "Role=production",
      WallDuration: "2000",
      CpuDuration: "1900",
      NumberOfJobs: "2",
      EarliestEndTime: String(end / 1000),
      LatestEndTime: String(end / 1000 + 60),
      ServiceLevelType: "HEPscore23",
      ServiceLevel: "16.5",
    });
    expect(sums.reduce((n, s) => n + Number(s.NumberOfJobs), 0)).toBe(4);
    for (const f of files) checkApelMessage(verify(join(out, f)), { strictVo: true });
  });

  it("dry run: normalised summaries (v0.3) carry durations × the queue's benchmark and pass APEL's loader rules", async () => {
    const out = join(dir, "dry-norm");
    await publishApel(db, opts("summaries-v0.3", { outDir: out }));
    const texts = readdirSync(out)
      .sort()
      .map((f) => verify(join(out, f)));
    const checked = texts.map((t) => checkApelMessage(t, { strictVo: true }));
    expect(checked.map((c) => c.kind)).toEqual(["normalised summary v0.3", "normalised summary v0.3", "sync v0.1"]);
    const atlas = checked.flatMap((c) => c.records).find((s) => s.VO === "atlas")!;
    expect(atlas).toMatchObject({
      WallDuration: "2000",
      CpuDuration: "1900",
      NormalisedWallDuration: "33000",
      NormalisedCpuDuration: "31350",
      NumberOfJobs: "2",
    });
  });

  it("sends to the ARGO endpoint once; a second run sends nothing; republish sends the range again", async () => {
    received.length = 0;
    expect(await publishApel(db, opts("individual"))).toMatchObject({ messages: 3, records: 4 });
    expect(received).toHaveLength(3);
    expect(received[0]!.url).toBe("/v1/projects/accounting/topics/gLite-APEL:publish");
    expect(received[0]!.apiKey).toBe("k1");
    const sentText = Buffer.from(received[0]!.body.messages[0]!.data, "base64").toString();
    writeFileSync(join(dir, "sent.msg"), sentText);
    expect(parseMessage(verify(join(dir, "sent.msg"))).header).toBe("APEL-individual-job-message: v0.3");
    expect(await publishApel(db, opts("individual"))).toMatchObject({ messages: 0, records: 0 });
    expect(received).toHaveLength(3);
    const day = end / 1000 - 12 * 3600;
    expect(await publishApel(db, opts("individual", { range: { from: day, to: day + 86_399 } }))).toMatchObject({ records: 4 });
    expect(received).toHaveLength(6);
  });

  it("without a configured key: the key from ARGO's authentication service for the host certificate, asked once, asked again after a 401", async () => {
    received.length = 0;
    authnCalls.length = 0;
    const viaAuthn = (certFile: string, keyFile: string) => {
      const o = opts("individual");
      const url = `https://localhost:${authnPort}/v1/service-types/ams/hosts/localhost:authx509`;
      return { ...o, argo: { ...o.argo!, token: undefined, authn: { url, certFile, keyFile } } };
    };
    // A certificate the CA did not sign: refused, nothing sent, nothing remembered as sent.
    await expect(publishApel(db, viaAuthn(rogueCert, rogueKey))).rejects.toMatchObject({ code: "ACCT_ARGO_AUTHN", status: 401 });
    expect(received).toHaveLength(0);
    expect(await publishApel(db, viaAuthn(cert, key))).toMatchObject({ messages: 3, records: 4 });
    expect(authnCalls.slice(1)).toEqual([{ authorized: true, cn: "localhost", url: "/v1/service-types/ams/hosts/localhost:authx509" }]);
    expect(received.map((r) => r.apiKey)).toEqual(["t1", "t1", "t1"]);
    // The service rotates the key: the cached one gets a 401, a new one is asked for and the message sent once.
    issued = "t2";
    await db.insert([{ record: usageRecord("3-0", entry("late2", {}), { vomslessVo: "x" }), streamId: "3-0" }]);
    expect(await publishApel(db, viaAuthn(cert, key))).toMatchObject({ messages: 2, records: 1 });
    expect(authnCalls).toHaveLength(3);
    expect(received.slice(3).map((r) => r.apiKey)).toEqual(["t2", "t2"]);
    issued = "t1";
  });

  it("summaries: a month is sent again only when it changed", async () => {
    received.length = 0;
    expect((await publishApel(db, opts("summaries"))).messages).toBeGreaterThan(0);
    const first = received.length;
    expect((await publishApel(db, opts("summaries"))).messages).toBe(0);
    await db.insert([
      { record: usageRecord("2-0", entry("late1", { fqans: JSON.stringify(["/atlas"]) }), { vomslessVo: "x" }), streamId: "2-0" },
    ]);
    expect((await publishApel(db, opts("summaries"))).messages).toBe(first);
    // Another message type is another text: every month is sent again, in the new form.
    expect((await publishApel(db, opts("summaries-v0.3"))).messages).toBe(first);
  });
});
