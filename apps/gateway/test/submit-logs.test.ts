import { Writable } from "node:stream";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { startTestGateway, XRSL, type TestGateway } from "./harness.js";

/**
 * What the gateway's log says about a submission a limit refused (issue 38): one line per
 * request with the count, and no claim that jobs were withdrawn when none was created.
 */
let t: TestGateway;
const lines: { level: number; msg: string; [k: string]: unknown }[] = [];

beforeAll(async () => {
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const l of chunk.toString("utf8").split("\n").filter(Boolean)) lines.push(JSON.parse(l) as (typeof lines)[number]);
      cb();
    },
  });
  t = await startTestGateway(inject("redisUrl"), { quotas: { jobsPerOwner: 2 } }, undefined, pino({ level: "debug" }, sink));
});
afterAll(async () => t?.close());

const bulk = (n: number, tag: string) => "+" + Array.from({ length: n }, (_, i) => `(${XRSL(`${tag}${i}`)})`).join("");
const submit = async (body: string) => {
  const r = await t.request("POST", `${t.rest}/1.1/jobs?action=new`, { body, accept: "application/json" });
  expect(r.status).toBe(201);
  // The hold's release runs once the answer is in the socket: give it a moment.
  await new Promise((res) => setTimeout(res, 300));
  return r.json().job as { "status-code": string }[];
};
const about = (re: RegExp) => lines.filter((l) => re.test(l.msg));

describe("a submission refused by the per-owner quota", () => {
  it("partly refused: one line with the count; the created jobs are released, nothing said withdrawn", async () => {
    const items = await submit(bulk(5, "p"));
    expect(items.map((j) => j["status-code"])).toEqual(["201", "201", "403", "403", "403"]);
    const quota = about(/not created/);
    expect(quota).toHaveLength(1);
    expect(quota[0]).toMatchObject({ refused: 3, created: 2, limit: "owner" });
    expect(quota[0]!.msg).toContain("quotas.jobsPerOwner (2)");
    expect(about(/withdrawn/)).toEqual([]);
  });

  it("wholly refused: one quota line per request and no 'withdrawn jobs' (no job was created)", async () => {
    lines.length = 0;
    for (let i = 0; i < 3; i++) expect((await submit(bulk(4, `w${i}`))).every((j) => j["status-code"] === "403")).toBe(true);
    expect(about(/not created/).map((l) => l.refused)).toEqual([4, 4, 4]);
    expect(about(/withdrawn|hold had already ended/)).toEqual([]);
  });
});
