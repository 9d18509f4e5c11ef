/**
 * Expansion bombs through the real gateway (TLS, real Redis): small bodies that would expand to
 * hundreds of megabytes (rsl_substitution doubling chains, variables redefined through each
 * other, many references to one big value), huge lists, deep nesting and bundles of thousands of
 * descriptions. Each is refused while it is read — a per-item 400 naming the cap, or 413 for the
 * body — the gateway's memory stays bounded, and it keeps serving.
 */
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { ADL, startTestGateway, XRSL, type J, type TestGateway } from "../../apps/gateway/test/harness.js";

// A full collection before each measurement, so what is compared is live memory, not garbage.
setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;

let t: TestGateway;
let baseline = 0;
let baseHeap = 0;
let peak = 0;
let sampler: NodeJS.Timeout | undefined;
const MB = 1024 * 1024;

beforeAll(async () => {
  // Default limits: 5 MiB bodies, 1000 descriptions per request.
  t = await startTestGateway(inject("redisUrl"));
  await submit(XRSL("warm-up"));
  sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 5);
});
afterAll(async () => {
  clearInterval(sampler);
  await t?.close();
});

async function submit(body: string, ct = "application/rsl") {
  const t0 = performance.now();
  const r = await t.request("POST", `${t.rest}/1.1/jobs?action=new`, { body, accept: "application/json", headers: { "content-type": ct } });
  return { status: r.status, json: r.text ? (r.json() as J) : undefined, ms: performance.now() - t0 };
}

/** The one per-item result of a single-description body. */
async function oneItem(body: string, ct?: string): Promise<J> {
  const r = await submit(body, ct);
  expect(r.status).toBe(201);
  expect(r.json.job).toHaveLength(1);
  expect(r.ms).toBeLessThan(5000);
  return r.json.job[0];
}

/** A job without `arguments`, so the bombs can put their expansion there. */
const JOB = (extra: string) => `&(executable=/bin/true)(stdout=out)${extra}`;
const doubling = (steps: number) => {
  let s = '(rsl_substitution=("V0" "0123456789abcdef0123456789abcdef"))';
  for (let i = 1; i <= steps; i++) s += `(rsl_substitution=("V${i}" $(V${i - 1})#$(V${i - 1})))`;
  return s;
};

describe("expansion bombs: refused while reading, with the cap named", () => {
  it("doubling chain: a 2 KB body that would expand to 32 GiB", async () => {
    const body = JOB(`${doubling(30)}(arguments=$(V30))`);
    expect(body.length).toBeLessThan(2048);
    const item = await oneItem(body);
    expect(item["status-code"]).toBe("400");
    expect(item.reason).toMatch(/exceeds the limit maxValueChars=131072/);
  });

  it("variables redefined through each other (mutual references)", async () => {
    const mutual =
      '(rsl_substitution=("A" "abababababababab")("B" "babababababababa"))' +
      '(rsl_substitution=("A" $(B)#$(A)#$(B))("B" $(A)#$(B)#$(A)))'.repeat(40);
    const item = await oneItem(JOB(`${mutual}(arguments=$(A) $(B))`));
    expect(item["status-code"]).toBe("400");
    expect(item.reason).toMatch(/exceeds the limit (maxValueChars|maxSubstitutionDepth)=/);
  });

  it("many references to one large value", async () => {
    const refs = " $(V11)".repeat(200);
    const item = await oneItem(JOB(`${doubling(11)}(arguments=${refs})`));
    expect(item["status-code"]).toBe("400");
    expect(item.reason).toMatch(/exceeds the limit maxExpandedChars=1048576/);
  });

  it("a + bundle whose parts each stay under the per-description cap shares one body budget", async () => {
    // Each part: 128 Ki characters of chain + 13 × 64 Ki of references ≈ 0.94 Mi (< 1 Mi per
    // description); the 9th part passes the body's 8 Mi.
    const part = `(${JOB(`${doubling(11)}(arguments=${" $(V11)".repeat(13)})`)})`;
    const r = await submit(`+${part.repeat(10)}`);
    expect(r.status).toBe(201);
    const codes = r.json.job.map((i: J) => i["status-code"]);
    expect(codes).toEqual([...Array(8).fill("201"), "400", "400"]);
    expect(r.json.job.at(-1).reason).toMatch(/exceeds the limit maxTotalExpandedChars=8388608/);
  });

  it("huge lists, many variables, deep nesting (xRSL and ADL)", async () => {
    const list = await oneItem(JOB(`(arguments=${"a ".repeat(20_000)})`));
    expect(list.reason).toMatch(/exceeds the limit maxListItems=10000/);
    const vars = await oneItem(JOB(`(rsl_substitution=${Array.from({ length: 1500 }, (_, i) => `("N${i}" "v")`).join("")})`));
    expect(vars.reason).toMatch(/exceeds the limit maxVariables=1000/);
    const deep = await oneItem(JOB(`(arguments=${"(".repeat(50_000)}${")".repeat(50_000)})`));
    expect(deep.reason).toMatch(/exceeds the limit maxDepth=64/);
    const deepXml = await oneItem(ADL("deep", "<a>".repeat(50_000) + "</a>".repeat(50_000)), "application/xml");
    expect(deepXml["status-code"]).toBe("400");
    expect(deepXml.reason).toMatch(/exceeds the limit maxDepth=64/);
    for (const item of [list, vars, deep]) expect(item["status-code"]).toBe("400");
  });

  it("10,000 descriptions in one + (and in one ActivityDescriptions) → 413 for the body", async () => {
    const many = await submit(`+${"(&(executable=/bin/true))".repeat(10_000)}`);
    expect(many.status).toBe(413);
    expect(many.json.reason).toMatch(/exceeds the limit maxDescriptions=1000/);
    const adl = await submit(`<ActivityDescriptions>${"<ActivityDescription/>".repeat(10_000)}</ActivityDescriptions>`, "application/xml");
    expect(adl.status).toBe(413);
    expect(adl.json.reason).toMatch(/maxDescriptions=1000/);
    const part = `(&(executable=/bin/true)${`(arguments=${"a ".repeat(50)})`.repeat(9)})`;
    const nodes = await submit(`+${part.repeat(500)}`);
    expect(nodes.status).toBe(413);
    expect(nodes.json.reason).toMatch(/exceeds the limit maxNodes=200000/);
  });

  it("repeated bombs leave memory bounded and the gateway serving", async () => {
    // Every one of these is refused; each part of the + bundle alone passes 1 Mi characters.
    const bombs: Array<[string, number]> = [
      [JOB(`${doubling(40)}(arguments=$(V40))`), 201],
      [`+${`(${JOB(`${doubling(11)}(arguments=${" $(V11)".repeat(20)})`)})`.repeat(20)}`, 201],
      [JOB(`(arguments=${"(".repeat(50_000)}${")".repeat(50_000)})`), 201],
      [`+${"(&(executable=/bin/true))".repeat(10_000)}`, 413],
    ];
    gc();
    baseline = process.memoryUsage().rss;
    baseHeap = process.memoryUsage().heapUsed;
    peak = baseline;
    for (let round = 0; round < 5; round++) {
      for (const [body, status] of bombs) {
        const r = await submit(body);
        expect(r.status).toBe(status);
        if (status === 201) expect(r.json.job.every((i: J) => i["status-code"] === "400")).toBe(true);
      }
    }
    gc();
    const grown = (process.memoryUsage().rss - baseline) / MB;
    const heap = (process.memoryUsage().heapUsed - baseHeap) / MB;
    const peakGrowth = (peak - baseline) / MB;
    // Without the caps one doubling chain alone needs gigabytes; with them a request holds at
    // most one description's budget (1 Mi characters) before it is refused, and keeps nothing.
    expect(grown).toBeLessThan(64);
    expect(heap).toBeLessThan(16);
    expect(peakGrowth).toBeLessThan(128);
    console.log(`expansion bombs: RSS +${grown.toFixed(1)} MB after (heap +${heap.toFixed(1)} MB), peak +${peakGrowth.toFixed(1)} MB`);
    const ok = await oneItem(XRSL("after"));
    expect(ok["status-code"]).toBe("201");
    expect((await t.request("GET", `${t.rest}/1.1/jobs`, { accept: "application/json" })).status).toBe(200);
  });
});
