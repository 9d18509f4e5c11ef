/**
 * Per-owner quota exhaustion through the real gateway (TLS, real Redis): jobs held per owner and
 * the CE-wide limit (WIPED records count against neither), session bytes per job and per owner
 * (refused before anything is lost), delegations per owner and renewals per minute. Each refusal
 * is the status clients handle with a reason that names the quota and its limit; other owners
 * are unaffected.
 */
import { request as httpsRequest } from "node:https";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { SessionBytes } from "@ce/store";
import { createPki, startTestGateway, XRSL, type CredName, type TestGateway } from "../../apps/gateway/test/harness.js";
import { quietPeriod } from "@ce/testing";

const JOBS_PER_OWNER = 3;
const MAX_TOTAL = 5;
const PER_JOB = 1000;
const PER_OWNER = 1500;
let t: TestGateway;

beforeAll(async () => {
  t = await startTestGateway(inject("redisUrl"), {
    jobs: { maxTotal: MAX_TOTAL },
    quotas: {
      jobsPerOwner: JOBS_PER_OWNER,
      sessionBytesPerJob: PER_JOB,
      sessionBytesPerOwner: PER_OWNER,
      delegationsPerOwner: 3,
      delegationRenewalsPerMinute: 2,
    },
  });
});
afterAll(async () => {
  await t?.close();
});

interface Item {
  "status-code": string;
  reason: string;
  id?: string;
}

async function submit(as: CredName): Promise<Item> {
  const r = await t.request("POST", `${t.rest}/1.1/jobs?action=new`, {
    as,
    body: XRSL(),
    accept: "application/json",
    headers: { "content-type": "application/rsl" },
  });
  expect(r.status).toBe(201);
  return r.json().job[0] as Item;
}

async function wipe(id: string): Promise<void> {
  const rec = (await t.gw.services.jobs.get(id))!;
  expect(await t.gw.services.jobs.update({ ...rec, state: "FINISHED" }, { state: "DELETED" })).toBeDefined();
}

const sess = (id: string, rel: string) => `${t.rest}/1.1/jobs/${id}/session/${rel}`;
const put = (id: string, rel: string, body: string, headers: Record<string, string> = {}) =>
  t.request("PUT", sess(id, rel), { body, headers, accept: "application/json" });

/** A chunked PUT (no Content-Length): the quota can only be checked while the body streams. */
function putChunked(id: string, rel: string, chunks: string[]): Promise<{ status: number; text: string }> {
  const c = createPki().creds.alice!;
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      {
        host: "127.0.0.1",
        port: t.gw.port,
        method: "PUT",
        path: sess(id, rel),
        agent: false,
        rejectUnauthorized: false,
        cert: c.cert,
        key: c.key,
        headers: { accept: "application/json" },
      },
      (res) => {
        let text = "";
        res.on("data", (d: Buffer) => (text += d.toString()));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, text }));
      },
    );
    req.on("error", reject);
    for (const ch of chunks) req.write(ch);
    req.end();
  });
}

describe("jobs held per owner and in total", () => {
  it("refuses the owner's job over quotas.jobsPerOwner (per-item 403 naming it), not other owners; WIPED jobs free the slot", async () => {
    const ids: string[] = [];
    for (let i = 0; i < JOBS_PER_OWNER; i++) {
      const it = await submit("alice");
      expect(it["status-code"]).toBe("201");
      ids.push(it.id!);
    }
    const over = await submit("alice");
    expect(over["status-code"]).toBe("403");
    expect(over.reason).toMatch(/quotas\.jobsPerOwner \(3 jobs/);
    expect((await submit("bob"))["status-code"]).toBe("201");

    await wipe(ids[0]!);
    const again = await submit("alice");
    expect(again["status-code"]).toBe("201");
    expect((await submit("alice"))["status-code"]).toBe("403");
  });

  it("the CE-wide jobs.maxTotal does not count WIPED records", async () => {
    // alice holds 3 live + 1 WIPED, bob 1 live: 4 of 5 counted.
    expect(await t.gw.services.jobs.held()).toBe(4);
    expect((await submit("bob"))["status-code"]).toBe("201");
    const full = await submit("bob");
    expect(full["status-code"]).toBe("503");
    expect(full.reason).toMatch(/CE job limit \(5\)/);
  });
});

describe("session bytes per job and per owner", () => {
  let a: string;
  let b: string;
  const bytes = () => new SessionBytes(t.gw.services.redis, t.prefix, { perJob: PER_JOB, perOwner: PER_OWNER });
  const owner = () => t.pki.dn.alice;

  beforeAll(async () => {
    // Room for two more of alice's jobs.
    const rows = await t.gw.services.jobs.list(owner(), ["ACCEPTING"]);
    for (const r of rows.slice(0, 2)) await wipe(r.id);
    a = (await submit("alice")).id!;
    b = (await submit("alice")).id!;
  });

  it("a declared upload over quotas.sessionBytesPerJob is refused before anything is written (507 naming it); the old content stays", async () => {
    expect((await put(a, "one", "x".repeat(800))).status).toBe(200);
    const over = await put(a, "two", "y".repeat(300));
    expect(over.status).toBe(507);
    expect(over.text).toMatch(/quotas\.sessionBytesPerJob \(1000 bytes\)/);
    expect((await t.request("GET", sess(a, "two"))).status).toBe(404);

    // Overwriting charges only the growth; a replacement over the quota keeps the old file.
    expect((await put(a, "one", "z".repeat(900))).status).toBe(200);
    const big = await put(a, "one", "w".repeat(1200));
    expect(big.status).toBe(507);
    expect((await t.request("GET", sess(a, "one"))).text).toBe("z".repeat(900));
    expect((await bytes().usage(owner(), a)).job).toBe(900);
  });

  it("a chunked upload refused midway is removed, not left half-written", async () => {
    const res = await putChunked(a, "chunked", ["c".repeat(60), "c".repeat(60)]);
    expect(res.status).toBe(507);
    expect(res.text).toMatch(/sessionBytesPerJob/);
    expect((await t.request("GET", sess(a, "chunked"))).status).toBe(404);
    expect((await bytes().usage(owner(), a)).job).toBe(900);
  });

  it("a range beyond the quota is refused and not reported complete", async () => {
    const res = await put(b, "part", "p".repeat(700), { "content-range": "bytes 0-699/2000" });
    expect(res.status).toBe(507);
    expect(res.text).toMatch(/quotas\.sessionBytesPerOwner \(1500 bytes\)/);
  });

  it("the owner total spans jobs; deleting a file or wiping a job gives its bytes back", async () => {
    const over = await put(b, "in", "q".repeat(700));
    expect(over.status).toBe(507);
    expect(over.text).toMatch(
      /quotas\.sessionBytesPerOwner \(1500 bytes\) would be exceeded; 900 bytes are already uploaded for all jobs of this owner/,
    );
    expect((await t.request("DELETE", sess(a, "one"))).status).toBe(202);
    expect((await put(b, "in", "q".repeat(700))).status).toBe(200);
    expect((await bytes().usage(owner(), b)).owner).toBe(700);
    await wipe(b);
    expect(await bytes().usage(owner(), b)).toEqual({ job: 0, owner: 0 });
  });

  it("deleting a subdirectory gives back the bytes of every file under it", async () => {
    expect((await put(a, "d/x", "1".repeat(300))).status).toBe(200);
    expect((await put(a, "d/e/y", "2".repeat(200))).status).toBe(200);
    expect((await bytes().usage(owner(), a)).job).toBe(500);
    expect((await t.request("DELETE", sess(a, "d"))).status).toBe(202);
    expect(await bytes().usage(owner(), a)).toEqual({ job: 0, owner: 0 });
    // Without that release the owner's counter would have stayed full: 1000 bytes fit again.
    expect((await put(a, "again", "3".repeat(1000))).status).toBe(200);
  });
});

describe("delegations per owner and renewals per minute", () => {
  const newJwt = (as: CredName) =>
    t.request("POST", `${t.rest}/1.1/delegations?action=new&type=jwt`, { as, headers: { "x-token-delegation": "opaque-token" } });

  it("refuses the owner's delegation over quotas.delegationsPerOwner (403 naming it), not other owners", async () => {
    const made = [];
    for (let i = 0; i < 3; i++) made.push(await newJwt("alice"));
    expect(made.map((r) => r.status)).toEqual([201, 201, 201]);
    const over = await newJwt("alice");
    expect(over.status).toBe(403);
    expect(over.text).toMatch(/limit is 3 per identity \(quota quotas\.delegationsPerOwner\)/);
    expect((await newJwt("bob")).status).toBe(201);
    // An X.509 request is refused too, before a key is spent on it.
    expect((await t.request("POST", `${t.rest}/1.1/delegations?action=new`, { as: "alice" })).status).toBe(403);
  });

  it("refuses renewals over quotas.delegationRenewalsPerMinute with 429 and Retry-After", async () => {
    // Not across a minute boundary: the window is per calendar minute.
    if (Date.now() % 60_000 > 55_000) await quietPeriod(60_000 - (Date.now() % 60_000) + 50, "start in a fresh calendar minute");
    const id = (await newJwt("bob")).headers.location!.split("/").pop()!;
    const renew = () =>
      t.request("POST", `${t.rest}/1.1/delegations/${id}?action=renew`, { as: "bob", headers: { "x-token-delegation": "renewed-token" } });
    expect((await renew()).status).toBe(200);
    expect((await renew()).status).toBe(200);
    const over = await renew();
    expect(over.status).toBe(429);
    expect(over.text).toMatch(/limit is 2 per minute per identity \(quota quotas\.delegationRenewalsPerMinute\)/);
    expect(Number(over.headers["retry-after"])).toBeGreaterThan(0);
  });
});
