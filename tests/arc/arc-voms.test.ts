/**
 * The real ARC client with a VOMS proxy against a CE whose only queue is open to one VO role:
 * arcsub → arcstat → arcget succeed with a `/atlas/Role=production` proxy; a plain proxy and a
 * proxy of another role are refused at submission. The proxies are real VOMS proxies made by
 * voms-proxy-fake (AC signed by a test VOMS server that the CE's vomsdir lists).
 */
import { X509Certificate } from "node:crypto";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { HAS_VOMS_FAKE } from "@ce/x509/testing";
import { startStack, type Stack } from "@ce/testing/stack";
import { stackVoms } from "@ce/testing/voms";
import { arc, HAS_ARC, ok, parseArcstat, restCall, submittedJobs, waitFor } from "./arc-tools.js";

const XRSL = `&(executable="/bin/sh")(arguments="-c" "echo vo job ran")(jobname="voms-e2e")(queue="atlasprod")(stdout="out.txt")(outputfiles=("out.txt" ""))`;

describe.skipIf(!HAS_ARC || !HAS_VOMS_FAKE)("ARC client with a VOMS proxy against a VO-only queue", () => {
  let stack: Stack;
  let work: string;
  const proxies: Record<"prod" | "plain" | "pilot", string> = { prod: "", plain: "", pilot: "" };

  beforeAll(async () => {
    stack = await startStack({
      redisUrl: inject("redisUrl"),
      redisUsers: inject("redisUsers"),
      config: { jobs: { queues: [{ name: "atlasprod", allow: ["fqan:/atlas/Role=production"] }], defaultQueue: "atlasprod" } },
      prepare: (state) => {
        const voms = stackVoms(state, ["atlas"]);
        mkdirSync(join(state, "home-proxies"), { recursive: true });
        proxies.prod = voms.proxy(join(state, "home-proxies", "prod.pem"), { vo: "atlas", fqans: ["/atlas/Role=production", "/atlas"] });
        proxies.pilot = voms.proxy(join(state, "home-proxies", "pilot.pem"), { vo: "atlas", fqans: ["/atlas/Role=pilot", "/atlas"] });
        proxies.plain = join(state, "pki", "user", "proxy.pem");
      },
    });
    work = join(stack.state, "work");
    mkdirSync(work, { recursive: true });
    writeFileSync(join(work, "job.xrsl"), XRSL);
  }, 180_000);
  afterAll(async () => {
    await stack?.stop();
  }, 60_000);

  const env = (proxy: string) => ({ ...stack.arcEnv, X509_USER_PROXY: proxy, X509_VOMS_DIR: join(stack.pki, "vomsdir") });
  const run = (proxy: string, tool: string, args: string[]) => arc(tool, args, { env: env(proxy), cwd: work, timeoutMs: 60_000 });

  it("arcsub/arcstat/arcget work with the production-role proxy", { timeout: 180_000 }, async () => {
    const jobsDat = join(stack.state, "home", "jobs-prod.dat");
    const sub = ok(await run(proxies.prod, "arcsub", ["-j", jobsDat, "-C", stack.url, "-T", "arcrest", "job.xrsl"]), "arcsub");
    const [url] = submittedJobs(sub.stdout);
    expect(url).toBeDefined();
    const id = url!.split("/").pop()!;
    await waitFor(
      "job finished",
      async () => {
        const st = parseArcstat((await run(proxies.prod, "arcstat", ["-j", jobsDat, "-l", url!])).stdout).get(id)?.state;
        if (st === "Failed") throw new Error("job failed");
        return st === "Finished" ? st : undefined;
      },
      90_000,
    );
    // The server recorded the FQANs in effect at submission (before arcget cleans the job).
    const r = await restCall({
      url: `${stack.url}/rest/1.0/jobs/${id}/diagnose/local`,
      proxyFile: proxies.prod,
      caFile: join(stack.pki, "ca", "ca.pem"),
    });
    expect(r.body).toMatch(/^voms=\/atlas\/Role=production$/m);
    // The delegation arcsub made keeps the VOMS attributes (storage elements authorize by VO).
    const deleg = /^delegationid=(.+)$/m.exec(r.body)?.[1];
    expect(deleg).toBeDefined();
    const d = await restCall({
      url: `${stack.url}/rest/1.0/delegations/${deleg}?action=get`,
      method: "POST",
      proxyFile: proxies.prod,
      caFile: join(stack.pki, "ca", "ca.pem"),
    });
    expect(d.status).toBe(200);
    const certs = d.body.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
    const withAc = certs.map((p) => new X509Certificate(p)).filter((c) => c.raw.includes(Buffer.from("2b06010401be45646405", "hex")));
    expect(withAc.length).toBeGreaterThan(0);
    expect(d.body).not.toMatch(/PRIVATE KEY/);
    ok(await run(proxies.prod, "arcget", ["-j", jobsDat, "-D", work, url!]), "arcget");
    expect(readFileSync(join(work, id, "out.txt"), "utf8")).toBe("vo job ran\n");
  });

  it("a plain proxy and a proxy of another role are refused at submission", async () => {
    for (const p of [proxies.plain, proxies.pilot]) {
      const r = await run(p, "arcsub", ["-j", join(stack.state, "home", "jobs-no.dat"), "-C", stack.url, "-T", "arcrest", "job.xrsl"]);
      expect(r.code, r.stdout + r.stderr).not.toBe(0);
      expect(submittedJobs(r.stdout)).toEqual([]);
      expect(r.stdout + r.stderr).toMatch(/not submitted/);
    }
    // What the client was told, through the same interface: a per-item 403 naming the queue.
    const direct = await restCall({
      url: `${stack.url}/rest/1.0/jobs?action=new`,
      method: "POST",
      body: XRSL,
      headers: { "content-type": "application/rsl" },
      proxyFile: proxies.pilot,
      caFile: join(stack.pki, "ca", "ca.pem"),
    });
    const item = (JSON.parse(direct.body) as { job: { "status-code": string; reason: string }[] }).job[0]!;
    expect(item["status-code"]).toBe("403");
    expect(item.reason).toMatch(/atlasprod/);
  });
});
