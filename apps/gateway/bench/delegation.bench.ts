/**
 * Delegation benchmark: `node --import tsx apps/gateway/bench/delegation.bench.ts`
 *
 * `POST /delegations?action=new` has to produce a fresh RSA-2048 key and CSR. The ARC client makes
 * one delegation per submitted job, so the gateway keeps a pool of keys generated ahead of time.
 * Measured: creation latency at the ARC client's pace (new → sign → PUT → submit, one job after
 * the other) and in a back-to-back burst that drains the pool. Target: p50 ≤ 20 ms.
 */
import { startRedis } from "@ce/testing/redis";
import { signCsrAsProxy } from "@ce/x509/testing";
import { startTestGateway, XRSL } from "../test/harness.js";

const N = Number(process.env.BENCH_DELEGATIONS ?? 100);
const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))]!;
const round = (x: number) => Math.round(x * 10) / 10;

const redis = await startRedis();
const t = await startTestGateway(redis.url, { delegations: { keyPoolSize: 8 } });
const alice = t.pki.creds.alice!;
await new Promise((r) => setTimeout(r, 3000)); // let the pool fill, as after a gateway start

async function create(): Promise<{ ms: number; id: string; csr: string }> {
  const t0 = performance.now();
  const r = await t.request("POST", `${t.rest}/1.0/delegations?action=new`);
  const ms = performance.now() - t0;
  if (r.status !== 201) throw new Error(`delegation new: ${r.status} ${r.text}`);
  return { ms, id: r.headers.location!.split("/").pop()!, csr: r.text };
}

// ARC client pace: one delegation per job, each followed by its PUT and the submission.
const paced: number[] = [];
for (let i = 0; i < N; i++) {
  const d = await create();
  paced.push(d.ms);
  const signed = signCsrAsProxy(d.csr, alice.cert, alice.key);
  const put = await t.request("PUT", `${t.rest}/1.0/delegations/${d.id}`, { body: signed });
  if (put.status !== 200) throw new Error(`delegation PUT: ${put.status} ${put.text}`);
  const sub = await t.request("POST", `${t.rest}/1.0/jobs?action=new`, {
    body: XRSL(`b${i}`, `(delegationid="${d.id}")`),
    accept: "application/json",
  });
  if (sub.status !== 201) throw new Error(`submit: ${sub.status} ${sub.text}`);
}
await new Promise((r) => setTimeout(r, 3000));
// Burst: creations back to back; once the pool is empty each waits for a key generation.
const burst: number[] = [];
for (let i = 0; i < N; i++) burst.push((await create()).ms);

const figures = {
  delegation_new_paced_p50_ms: round(pct(paced, 50)),
  delegation_new_paced_p99_ms: round(pct(paced, 99)),
  delegation_new_burst_p50_ms: round(pct(burst, 50)),
  delegation_new_burst_p99_ms: round(pct(burst, 99)),
  n: N,
};
console.log(
  `delegation creation at ARC-client pace: p50 ${figures.delegation_new_paced_p50_ms} ms, p99 ${figures.delegation_new_paced_p99_ms} ms (target p50 ≤ 20 ms)`,
);
console.log(
  `delegation creation back to back:      p50 ${figures.delegation_new_burst_p50_ms} ms, p99 ${figures.delegation_new_burst_p99_ms} ms`,
);
console.log(JSON.stringify(figures));
await t.close();
await redis.stop();
