import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { afterAll, describe, expect, it } from "vitest";
import { compileConfig } from "@ce/config";
import { parseSinfo, SlurmSlots } from "./lrms-slots.js";
import { queueVos, vosNamed } from "./queue-vos.js";

describe("parseSinfo", () => {
  it("sums per partition and counts a node in two partitions once for the cluster", () => {
    const s = parseSinfo("n1 main* 3/5/0/8\nn1 debug 3/5/0/8\nn2 main* 0/2/2/4\ngarbage line\n");
    expect({ total: s.total, allocated: s.allocated, idle: s.idle }).toEqual({ total: 12, allocated: 3, idle: 7 });
    expect(s.partitions.get("main")).toEqual({ total: 12, allocated: 3, idle: 7 });
    expect(s.partitions.get("debug")).toEqual({ total: 8, allocated: 3, idle: 5 });
  });
});

describe("SlurmSlots", () => {
  const dir = mkdtempSync(join(tmpdir(), "ce-sinfo-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const fake = (body: string) => {
    writeFileSync(join(dir, "sinfo"), `#!/bin/sh\necho run >> ${dir}/calls\n${body}\n`);
    chmodSync(join(dir, "sinfo"), 0o755);
  };

  it("runs sinfo at most once per refresh period and keeps the last answer when it fails", async () => {
    fake("echo 'n1 main* 1/7/0/8'");
    const src = new SlurmSlots({ binPath: dir, log: pino({ level: "silent" }), refreshMs: 60_000 });
    const first = await src.get();
    expect(first?.partitions.get("main")).toEqual({ total: 8, allocated: 1, idle: 7 });
    await Promise.all(Array.from({ length: 20 }, () => src.get()));
    expect(readFileSync(join(dir, "calls"), "utf8").trim().split("\n")).toHaveLength(1);
    fake("exit 1");
    // A period later: the failed run keeps the last good answer.
    const later = Date.now() + 61_000;
    expect((await src.get(later))?.total).toBe(8);
    await new Promise((r) => setTimeout(r, 200));
    expect((await src.get(later))?.total).toBe(8);
  });
});

describe("queueVos", () => {
  const cfg = (over: Record<string, unknown>) => compileConfig(over as never, tmpdir());
  it("takes the queue's vos, else its allow, else auth.allow, else the mapping rules", () => {
    const config = cfg({
      auth: { allow: ["vo:cms", "dn:/CN=x"] },
      mapping: { rules: [{ match: ["vo:lhcb"], user: "nobody" }] },
      jobs: { queues: [{ name: "a", vos: ["Atlas", "atlas", "x.y"] }, { name: "b", allow: ["fqan:/vo.example.org/Role=pilot", "group:/dteam", "vo:a*"] }, { name: "c" }] },
    });
    const [a, b, c] = config.jobs.queues;
    expect(queueVos(a!, config)).toEqual(["Atlas", "x.y"]);
    expect(queueVos(b!, config)).toEqual(["vo.example.org", "dteam"]);
    expect(queueVos(c!, config)).toEqual(["cms"]);
    expect(queueVos(c!, cfg({ mapping: { rules: [{ match: "vo:lhcb", user: "nobody" }] } }))).toEqual(["lhcb"]);
    expect(vosNamed(["dn:/CN=x", "*", "fqan:/*/Role=x"])).toEqual([]);
  });
});
