import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { afterAll, describe, expect, it } from "vitest";
import { compileConfig } from "@ce/config";
import { parseQhost, parseSinfo, SgeSlots, SlurmSlots } from "./lrms-slots.js";
import { queueVos, vosNamed } from "./queue-vos.js";
import { quietPeriod } from "@ce/testing";

describe("parseSinfo", () => {
  it("sums per partition and counts a node in two partitions once for the cluster", () => {
    const s = parseSinfo("n1 main* 3/5/0/8\nn1 debug 3/5/0/8\nn2 main* 0/2/2/4\ngarbage line\n");
    expect({ total: s.total, allocated: s.allocated, idle: s.idle }).toEqual({ total: 12, allocated: 3, idle: 7 });
    expect(s.partitions.get("main")).toEqual({ total: 12, allocated: 3, idle: 7 });
    expect(s.partitions.get("debug")).toEqual({ total: 8, allocated: 3, idle: 5 });
  });
});

/** `qhost -q -xml` as Grid Engine 8.1.9 prints it (hostvalue lines cut but one). */
const qhostXml = (hosts: Record<string, Record<string, [slots: number, used: number, resv: number, state: string]>>) =>
  `<?xml version='1.0'?>\n<qhost xmlns:xsd="http://arc.liv.ac.uk/repos/darcs/sge/source/dist/util/resources/schemas/qhost/qhost.xsd">\n <host name='global'>\n   <hostvalue name='num_proc'>-</hostvalue>\n </host>\n` +
  Object.entries(hosts)
    .map(
      ([h, qs]) =>
        ` <host name='${h}'>\n   <hostvalue name='num_proc'>8</hostvalue>\n` +
        Object.entries(qs)
          .map(([q, [slots, used, resv, state]]) =>
            [
              ` <queue name='${q}'>`,
              ["qtype_string", "BI"],
              ["slots_used", used],
              ["slots", slots],
              ["slots_resv", resv],
              ["state_string", state],
              " </queue>",
            ]
              .map((x) => (typeof x === "string" ? x : `   <queuevalue qname='${q}' name='${x[0]}'>${x[1]}</queuevalue>`))
              .join("\n"),
          )
          .join("\n") +
        "\n </host>\n",
    )
    .join("") +
  "</qhost>\n";

describe("parseQhost", () => {
  it("sums each queue's instances, gives a disabled or alarmed instance no idle slot, and counts a host in two queues once", () => {
    const s = parseQhost(
      qhostXml({
        n1: { main: [8, 3, 1, ""], short: [8, 2, 0, ""] },
        n2: { main: [4, 0, 0, "d"] },
        n3: { main: [4, 1, 0, "a"], short: [2, 0, 0, "u"] },
      }),
    );
    expect(s.partitions.get("main")).toEqual({ total: 16, allocated: 4, idle: 4 });
    expect(s.partitions.get("short")).toEqual({ total: 10, allocated: 2, idle: 6 });
    // n1: 8 slots, 5 used, at most 3 idle; n2 disabled; n3 in alarm and unknown.
    expect({ total: s.total, allocated: s.allocated, idle: s.idle }).toEqual({ total: 16, allocated: 6, idle: 3 });
    expect(parseQhost("error: unable to contact qmaster\n").partitions.size).toBe(0);
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
    await quietPeriod(200, "the failed refresh runs in the background; afterwards the last good answer must still stand");
    expect((await src.get(later))?.total).toBe(8);
  });
});

describe("SgeSlots", () => {
  const dir = mkdtempSync(join(tmpdir(), "ce-qhost-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  it("asks qhost -q -xml and keeps the last answer when qhost fails", async () => {
    writeFileSync(join(dir, "qhost.out"), qhostXml({ n1: { main: [4, 1, 0, ""] } }));
    const script = (body: string) =>
      writeFileSync(join(dir, "qhost"), `#!/bin/sh\n[ "$*" = "-q -xml" ] || exit 3\n${body}\n`, { mode: 0o755 });
    script(`cat ${dir}/qhost.out`);
    const src = new SgeSlots({ binPath: dir, log: pino({ level: "silent" }), refreshMs: 60_000 });
    expect((await src.get())?.partitions.get("main")).toEqual({ total: 4, allocated: 1, idle: 3 });
    script("echo 'error: unable to contact qmaster' >&2; exit 1");
    const later = Date.now() + 61_000;
    await src.get(later);
    await quietPeriod(200, "the failed refresh runs in the background; afterwards the last good answer must still stand");
    expect((await src.get(later))?.total).toBe(4);
  });
});

describe("queueVos", () => {
  const cfg = (over: Record<string, unknown>) => compileConfig(over as never, tmpdir());
  it("takes the queue's vos, else its allow, else auth.allow, else the mapping rules", () => {
    const config = cfg({
      auth: { allow: ["vo:cms", "dn:/CN=x"] },
      mapping: { rules: [{ match: ["vo:lhcb"], user: "nobody" }] },
      jobs: {
        queues: [
          { name: "a", vos: ["Atlas", "atlas", "x.y"] },
          { name: "b", allow: ["fqan:/vo.example.org/Role=pilot", "group:/dteam", "vo:a*"] },
          { name: "c" },
        ],
      },
    });
    const [a, b, c] = config.jobs.queues;
    expect(queueVos(a!, config)).toEqual(["Atlas", "x.y"]);
    expect(queueVos(b!, config)).toEqual(["vo.example.org", "dteam"]);
    expect(queueVos(c!, config)).toEqual(["cms"]);
    expect(queueVos(c!, cfg({ mapping: { rules: [{ match: "vo:lhcb", user: "nobody" }] } }))).toEqual(["lhcb"]);
    expect(vosNamed(["dn:/CN=x", "*", "fqan:/*/Role=x"])).toEqual([]);
  });
});
