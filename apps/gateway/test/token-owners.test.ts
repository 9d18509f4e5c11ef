/**
 * Token owners are `<iss>/<sub>` with `sub` escaped (@ce/model tokenOwner). Unescaped, issuer
 * `<A>` with sub `r/x` and issuer `<A>/r` with sub `x` were one owner: each saw, killed and
 * cleaned the other's jobs and used the other's delegations. Two real issuers (one the other's
 * prefix, both configured), real signed tokens, the real gateway and Redis. And the records an
 * old gateway wrote for a `sub` with a `/` are that user's again after the migration.
 */
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { tokenOwner } from "@ce/model";
import { loadSecretBox, migrateTokenOwners, moveTokenOwner } from "@ce/store";
import { startTokenIssuer, type TokenIssuer } from "@ce/testing/token-issuer";
import { startTestGateway, XRSL, type TestGateway } from "./harness.js";

let t: TestGateway;
let idp: TokenIssuer;
let redis: Redis;
let A: string;
let B: string;

beforeAll(async () => {
  idp = await startTokenIssuer({ audience: "https://localhost:8443" });
  A = idp.issuer;
  B = `${A}/r`; // a second issuer whose name extends the first's; the same keys, by jwksUri
  t = await startTestGateway(inject("redisUrl"), {
    auth: {
      tokens: {
        issuers: [
          { issuer: A, caFile: idp.caFile },
          { issuer: B, jwksUri: `${A}/jwks`, caFile: idp.caFile },
        ],
      },
    },
  });
  redis = new Redis(inject("redisUrl"));
}, 60_000);
afterAll(async () => {
  redis?.disconnect();
  await t?.close();
  await idp?.close();
});

const as = (token: string) => ({ as: "none" as const, headers: { authorization: `Bearer ${token}` }, accept: "application/json" });

async function submit(token: string): Promise<string> {
  const o = as(token);
  const r = await t.request("POST", `${t.rest}/1.1/jobs?action=new`, {
    ...o,
    headers: { ...o.headers, "content-type": "application/rsl" },
    body: XRSL("mine"),
  });
  expect(r.status, r.text).toBe(201);
  return r.json().job[0].id as string;
}

async function delegation(token: string): Promise<string> {
  const r = await t.request("POST", `${t.rest}/1.1/delegations?action=new`, as(token));
  expect(r.status, r.text).toBe(201);
  return String(r.headers.location).split("/").pop()!;
}

async function jobIds(token: string): Promise<string[]> {
  const r = await t.request("GET", `${t.rest}/1.1/jobs`, as(token));
  expect(r.status).toBe(200);
  const j = r.json().job;
  return (Array.isArray(j) ? j : j ? [j] : []).map((x: { id: string }) => x.id).sort();
}

async function delegationIds(token: string): Promise<string[]> {
  const r = await t.request("GET", `${t.rest}/1.1/delegations`, as(token));
  expect(r.status).toBe(200);
  const d = r.json().delegation;
  return (Array.isArray(d) ? d : d ? [d] : []).map((x: { id: string }) => x.id).sort();
}

describe("token owners of two issuers whose names overlap", () => {
  it("A + sub r/x and A/r + sub x each see, kill and use only their own jobs and delegations", async () => {
    const one = await idp.mint({ sub: "r/x" });
    const two = await idp.mint({ iss: B, sub: "x" });
    const [j1, d1] = [await submit(one), await delegation(one)];
    const [j2, d2] = [await submit(two), await delegation(two)];

    expect(await jobIds(one)).toEqual([j1]);
    expect(await jobIds(two)).toEqual([j2]);
    expect(await delegationIds(one)).toEqual([d1]);
    expect(await delegationIds(two)).toEqual([d2]);
    // The other's job and delegation are not found, and cannot be killed.
    expect((await t.request("GET", `${t.rest}/1.1/jobs/${j1}/diagnose/description`, as(two))).status).toBe(404);
    expect((await t.request("POST", `${t.rest}/1.1/delegations/${d1}?action=get`, as(two))).status).toBe(404);
    const kill = await t.request("POST", `${t.rest}/1.1/jobs?action=kill`, {
      ...as(two),
      headers: { ...as(two).headers, "content-type": "application/json" },
      body: JSON.stringify({ job: [{ id: j1 }] }),
    });
    expect(kill.json().job).toMatchObject([{ id: j1, "status-code": "404" }]);
  });

  it("a job and delegation the old gateway wrote for a sub with a slash are that user's again after the migration", async () => {
    const token = await idp.mint({ sub: "q/y" });
    const [job, deleg] = [await submit(token), await delegation(token)];
    // What a gateway of the old version wrote for this user: the owner `<A>/q/y`, unescaped.
    const box = loadSecretBox(t.config);
    await moveTokenOwner(redis, t.prefix, box, tokenOwner(A, "q/y"), `${A}/q/y`);
    expect(await jobIds(token)).toEqual([]);

    const r = await migrateTokenOwners(redis, t.prefix, box, [A, B]);
    expect(r.moved.map((m) => [m.from, m.to, m.jobs, m.delegations])).toEqual([[`${A}/q/y`, tokenOwner(A, "q/y"), 1, 1]]);
    expect(await jobIds(token)).toEqual([job]);
    expect(await delegationIds(token)).toEqual([deleg]);
    const get = await t.request("POST", `${t.rest}/1.1/delegations/${deleg}?action=get`, as(token));
    expect(get.status).toBe(200); // the sealed key opens for the new owner
  });
});
