import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { enableRte } from "@ce/store";
import { startTestGateway, XRSL, xmlAll, type J, type TestGateway } from "./harness.js";

// RTEs a site enabled with `ceadm rte enable` (links under the control dir, not the configuration)
// are accepted at submission and published in GLUE2, as A-REX publishes rte/enabled; a queue's
// GPU limit refuses bigger requests by name and is published in GLUE2.

let t: TestGateway;
beforeAll(async () => {
  t = await startTestGateway(inject("redisUrl"), {
    jobs: {
      runtimeEnvironments: ["ENV/CONFIGURED"],
      queues: [
        { name: "main", maxGpusPerJob: 0 },
        { name: "gpu", maxGpusPerJob: 2 },
      ],
    },
  });
  const src = join(t.config.paths.stateDir, "site-rte");
  mkdirSync(src, { recursive: true });
  writeFileSync(join(src, "ATLAS-SITE"), "true\n");
  enableRte({ paths: t.config.paths, jobs: t.config.jobs }, "APPS/HEP/ATLAS-SITE-1.0", join(src, "ATLAS-SITE"));
});
afterAll(async () => t?.close());

describe("RTEs enabled under the control dir", () => {
  it("are published as ApplicationEnvironments next to the configured ones", async () => {
    const r = await t.request("GET", `${t.rest}/1.1/info`, { accept: "text/xml" });
    expect(xmlAll(r.text, "AppName")).toEqual(expect.arrayContaining(["ENV/CONFIGURED", "APPS/HEP/ATLAS-SITE"]));
    expect(xmlAll(r.text, "AppVersion")).toContain("1.0");
  });

  it("are accepted at submission; others are refused by name", async () => {
    const r = await t.request("POST", `${t.rest}/1.1/jobs?action=new`, {
      body: `+(${XRSL()}(runtimeenvironment="APPS/HEP/ATLAS-SITE"))(${XRSL()}(runtimeenvironment="APPS/HEP/NOPE"))`,
      accept: "application/json",
    });
    const items = r.json().job as Array<Record<string, string>>;
    expect(items[0]!["status-code"]).toBe("201");
    expect(items[1]).toEqual({ "status-code": "500", reason: "Requested runtime environment APPS/HEP/NOPE is missing" });
  });
});

describe("GPU requests", () => {
  it("within the queue's maxGpusPerJob → 201; above → 403 naming the queue and its limit", async () => {
    const r = await t.request("POST", `${t.rest}/1.1/jobs?action=new`, {
      body: `+(${XRSL()}(queue="gpu")(gpus=2))(${XRSL()}(queue="gpu")(gpus=3))(${XRSL()}(gpus=1))(${XRSL()})`,
      accept: "application/json",
    });
    const items = r.json().job as Array<Record<string, string>>;
    expect(items[0]!["status-code"]).toBe("201");
    expect(items[1]).toEqual({ "status-code": "403", reason: "Requested 3 GPU(s); queue gpu allows at most 2 per job (maxGpusPerJob)" });
    expect(items[2]).toEqual({ "status-code": "403", reason: "Requested 1 GPU(s); queue main has no GPUs (maxGpusPerJob 0)" });
    expect(items[3]!["status-code"]).toBe("201");
  });

  it("/info publishes the GPU queue's limit per job (GLUE 2.1 ComputingShareAcceleratorInfo), none for the queue without GPUs", async () => {
    const r = await t.request("GET", `${t.rest}/1.1/info`, { accept: "application/json" });
    const shares = [r.json().Domains.AdminDomain.Services.ComputingService.ComputingShare].flat() as J[];
    const byName = Object.fromEntries(shares.map((s) => [s.Name, s]));
    expect(byName.gpu?.ComputingShareAcceleratorInfo).toMatchObject({ Type: "GPU", MaxAcceleratorSlotsPerJob: "2" });
    expect(byName.main?.ComputingShareAcceleratorInfo).toBeUndefined();
    const xml = await t.request("GET", `${t.rest}/1.1/info`, { accept: "text/xml" });
    expect(xmlAll(xml.text, "MaxAcceleratorSlotsPerJob")).toEqual(["2"]);
  });
});
