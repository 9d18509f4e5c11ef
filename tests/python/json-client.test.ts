/**
 * Runs tests/python/ce_json_client.py (standard-library Python JSON client) against the whole CE
 * with bearer tokens from a test OIDC issuer the gateway trusts, plus an X.509 proxy for the
 * certificate part. The script checks every step itself; here we assert its exit status and its
 * summary line, and show its transcript on failure.
 */
import { spawn, spawnSync } from "node:child_process";
import { join, resolve } from "node:path";
import { HAS_VOMS_FAKE } from "@ce/x509/testing";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { startStack, type Stack } from "@ce/testing/stack";
import { startTokenIssuer, type TokenIssuer } from "@ce/testing/token-issuer";
import { stackVoms } from "@ce/testing/voms";

const SCRIPT = resolve(import.meta.dirname, "ce_json_client.py");
const HAS_PYTHON = spawnSync("python3", ["--version"]).status === 0;
if (!HAS_PYTHON) console.warn("json-client.test.ts SKIPPED: python3 not installed");
const MAX_PER_REQUEST = 4;

function python(args: string[], timeoutMs: number): Promise<{ code: number | null; out: string }> {
  return new Promise((res, rej) => {
    const p = spawn("python3", [SCRIPT, ...args], { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    p.stdout.on("data", (d) => (out += String(d)));
    p.stderr.on("data", (d) => (out += String(d)));
    const t = setTimeout(() => p.kill("SIGKILL"), timeoutMs);
    p.on("error", rej);
    p.on("close", (code) => (clearTimeout(t), res({ code, out })));
  });
}

describe.skipIf(!HAS_PYTHON)("Python JSON client (tokens, REST 1.1) against the CE", () => {
  let issuer: TokenIssuer;
  let stack: Stack;
  let vomsFile: string | undefined;

  beforeAll(async () => {
    // The gateway's accepted audience defaults to its endpoint origin; tokens are minted for it below.
    issuer = await startTokenIssuer({ audience: "set-per-token" });
    stack = await startStack({
      redisUrl: inject("redisUrl"),
      redisUsers: inject("redisUsers"),
      backend: "fork",
      config: {
        auth: { tokens: { issuers: [{ issuer: issuer.issuer, caFile: issuer.caFile }] } },
        gateway: { limits: { jobsPerSubmission: MAX_PER_REQUEST } },
        jobs: { queues: [{ name: "main" }, { name: "atlasprod", allow: ["fqan:/atlas/Role=production"] }], defaultQueue: "main" },
      },
      // A real VOMS proxy (voms-proxy-fake) whose AC a test VOMS server in the vomsdir signed.
      prepare: (state) => {
        if (!HAS_VOMS_FAKE) return;
        vomsFile = stackVoms(state, ["atlas"]).proxy(join(state, "pki", "user", "voms-proxy.pem"), {
          vo: "atlas",
          fqans: ["/atlas/Role=production"],
        });
      },
    });
  }, 120_000);

  afterAll(async () => {
    await stack?.stop();
    await issuer?.close();
  });

  it("ce_json_client.py passes every step (versions, instances, JWT delegation, bulk JSON, x509)", async () => {
    const aud = new URL(stack.url).origin;
    const token = await issuer.mint({ aud, sub: "py-user" });
    const readToken = await issuer.mint({ aud, sub: "py-user", scope: "compute.read" });
    // Delegated tokens are for storage: a different audience, never checked by the CE.
    const deleg = await issuer.mint({ aud: "https://storage.example.org", sub: "py-user", scope: "storage.read:/ storage.create:/" });
    const deleg2 = await issuer.mint({ aud: "https://storage.example.org", sub: "py-user", scope: "storage.read:/" });
    const r = await python(
      [
        "--url",
        stack.url,
        "--cafile",
        join(stack.pki, "ca", "ca.pem"),
        "--token",
        token,
        "--read-token",
        readToken,
        "--deleg-token",
        deleg,
        "--deleg-token2",
        deleg2,
        "--proxy",
        stack.arcEnv.X509_USER_PROXY!,
        "--max-per-request",
        String(MAX_PER_REQUEST),
        ...(vomsFile ? ["--voms-proxy", vomsFile] : []),
      ],
      150_000,
    );
    const summary = /^(\d+) passed, (\d+) failed$/m.exec(r.out);
    if (r.code !== 0 || !summary) console.error(r.out);
    else console.info(`ce_json_client.py: ${summary[0]}`);
    expect(r.out.split("\n").filter((l) => l.startsWith("FAIL"))).toEqual([]);
    expect(summary?.[2]).toBe("0");
    if (HAS_VOMS_FAKE) {
      for (const step of [
        "voms: submit to the VO queue '201'",
        "voms: activity carries the FQAN",
        "voms: plain proxy refused on the VO queue (per-item '403')",
      ]) {
        expect(r.out).toContain(`ok   ${step}`);
      }
    }
    expect(Number(summary?.[1])).toBeGreaterThanOrEqual(50);
    expect(r.code).toBe(0);
  }, 180_000);
});
