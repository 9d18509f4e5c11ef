import { existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileq, newNodeCapability, storeNodeCapabilityOp } from "@ce/controldir";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { nodeRoutes } from "../src/routes/node.js";
import { startHarness, type Harness } from "./session-harness.js";

/**
 * The node route (routes/node.ts): a batch job on a node that shares no file system with the CE
 * fetches its inputs and sends back outputs and batch facts with its job's capability, and that
 * capability opens nothing else: no other job, nothing once the batch run is over, no link out of
 * the session, no upload past the session quota. Real Redis, real files, the session code the
 * client routes use.
 */
let h: Harness;
const BASE = "/arex/node/1/jobs";
const QUOTA = 64 * 1024;

async function runningJob(state: "INLRMS" | "FINISHING" = "INLRMS"): Promise<{ id: string; token: string; hash: string }> {
  const id = await h.newJob({ state });
  const cap = newNodeCapability();
  await fileq.one(storeNodeCapabilityOp(h.services.control, id, cap.hash));
  mkdirSync(h.services.control.batchDir(id), { mode: 0o2770 });
  return { id, ...cap };
}

const bearer = (token: string) => ({ authorization: `Bearer ${token}`, accept: "application/json" });

beforeAll(async () => {
  h = await startHarness(inject("redisUrl"), { quotas: { sessionBytesPerJob: QUOTA } });
  h.app.route("/arex/node/1", nodeRoutes());
});
afterAll(async () => {
  await h?.close();
});

describe("node route: a batch job's capability", () => {
  it("fetches its inputs (regular files only) and sends outputs and batch facts; lrms_done rings the doorbell", async () => {
    const j = await runningJob();
    const session = h.services.control.sessionDir(j.id);
    writeFileSync(join(session, "in.txt"), "input\n");
    mkdirSync(join(session, "d"));
    writeFileSync(join(session, "d", "x.dat"), "nested");
    symlinkSync("/etc/passwd", join(session, "leak"));

    const list = await h.raw("GET", `${BASE}/${j.id}/files`, { headers: bearer(j.token) });
    expect(list.status).toBe(200);
    expect(list.text.split("\0").filter(Boolean).sort()).toEqual(["d/x.dat", "in.txt"]);
    expect((await h.raw("GET", `${BASE}/${j.id}/session/d/x.dat`, { headers: bearer(j.token) })).text).toBe("nested");
    const leak = await h.raw("GET", `${BASE}/${j.id}/session/leak`, { headers: bearer(j.token) });
    expect(leak.status).toBeGreaterThanOrEqual(400);
    expect(leak.text).not.toContain("root:");

    const put = await h.raw("PUT", `${BASE}/${j.id}/session/out/result.txt`, { headers: bearer(j.token), body: "result\n" });
    expect(put.status).toBe(200);
    expect(readFileSync(join(session, "out", "result.txt"), "utf8")).toBe("result\n");
    // A link the job left in its session is not written through.
    symlinkSync("/tmp", join(session, "tmp-link"));
    const through = await h.raw("PUT", `${BASE}/${j.id}/session/tmp-link/planted`, { headers: bearer(j.token), body: "x" });
    expect(through.status).toBeGreaterThanOrEqual(400);
    expect(existsSync("/tmp/planted")).toBe(false);

    const batch = h.services.control.batchDir(j.id);
    expect((await h.raw("PUT", `${BASE}/${j.id}/batch/diag`, { headers: bearer(j.token), body: "exitcode=0\n" })).status).toBe(200);
    expect(readFileSync(join(batch, "diag"), "utf8")).toBe("exitcode=0\n");
    expect((await h.raw("PUT", `${BASE}/${j.id}/batch/lrms_done`, { headers: bearer(j.token), body: "0 \n" })).status).toBe(200);
    expect(readFileSync(join(batch, "lrms_done"), "utf8")).toBe("0 \n");
    expect(existsSync(h.services.control.eventFile(j.id))).toBe(true);
    const other = await h.raw("PUT", `${BASE}/${j.id}/batch/local`, { headers: bearer(j.token), body: "localuser=root\n" });
    expect(other.status).toBe(404);
    expect(other.headers["x-error-code"]).toBe("NO_SUCH_FACT");
    const big = await h.raw("PUT", `${BASE}/${j.id}/batch/diag`, { headers: bearer(j.token), body: Buffer.alloc(64 * 1024 + 1, 120) });
    expect(big.status).toBe(413);
    expect(readFileSync(join(batch, "diag"), "utf8")).toBe("exitcode=0\n");
  });

  it("uploads go through the session quota and name rules", async () => {
    const j = await runningJob();
    const over = await h.raw("PUT", `${BASE}/${j.id}/session/huge.bin`, { headers: bearer(j.token), body: Buffer.alloc(QUOTA + 1) });
    // 507 with the quota named, exactly as a client's upload over the quota.
    expect(over.status).toBe(507);
    expect(existsSync(join(h.services.control.sessionDir(j.id), "huge.bin"))).toBe(false);
    const nul = await h.raw("PUT", `${BASE}/${j.id}/session/a%00b`, { headers: bearer(j.token), body: "x" });
    expect(nul.status).toBe(400);
    expect(nul.headers["x-error-code"]).toBe("BAD_PATH");
    // Dot segments resolve before routing: out of `session/` is no route that writes.
    const dots = await h.raw("PUT", `${BASE}/${j.id}/session/%2e%2e/%2e%2e/${j.id}/batch/escape`, { headers: bearer(j.token), body: "x" });
    expect(dots.status).toBeGreaterThanOrEqual(400);
    expect(existsSync(join(h.services.control.batchDir(j.id), "escape"))).toBe(false);
  });

  it("opens no other job, and a token of the wrong shape or the stored hash itself is no capability", async () => {
    const a = await runningJob();
    const b = await runningJob();
    writeFileSync(join(h.services.control.sessionDir(b.id), "secret.txt"), "b's data\n");
    for (const path of [`files`, `session/secret.txt`]) {
      const r = await h.raw("GET", `${BASE}/${b.id}/${path}`, { headers: bearer(a.token) });
      expect(r.status).toBe(404);
      expect(r.text).not.toContain("b's data");
    }
    const put = await h.raw("PUT", `${BASE}/${b.id}/batch/lrms_done`, { headers: bearer(a.token), body: "0 \n" });
    expect(put.status).toBe(404);
    expect(existsSync(join(h.services.control.batchDir(b.id), "lrms_done"))).toBe(false);
    // A job that has no capability at all (an ordinary client job) is as missing.
    const plain = await h.newJob({ state: "INLRMS" });
    expect((await h.raw("GET", `${BASE}/${plain}/files`, { headers: bearer(a.token) })).status).toBe(404);

    const none = await h.raw("GET", `${BASE}/${a.id}/files`, { headers: { accept: "application/json" } });
    expect(none.status).toBe(401);
    expect(none.headers["x-error-code"]).toBe("NODE_CAPABILITY_REQUIRED");
    expect(none.headers["www-authenticate"]).toBe('Bearer realm="ce-node"');
    expect((await h.raw("GET", `${BASE}/${a.id}/files`, { headers: bearer(a.hash) })).status).toBe(401);
    const flipped = a.token.slice(0, -1) + (a.token.endsWith("A") ? "B" : "A");
    expect((await h.raw("GET", `${BASE}/${a.id}/files`, { headers: bearer(flipped) })).status).toBe(404);
    // The client routes take no capability either: it is no grid identity.
    expect((await h.raw("GET", `/arex/rest/1.0/jobs/${a.id}/session/`, { headers: bearer(a.token), subject: "nobody" })).status).toBe(404);
  });

  it("opens nothing once the batch run is over", async () => {
    const j = await runningJob("FINISHING");
    writeFileSync(join(h.services.control.sessionDir(j.id), "in.txt"), "input\n");
    const r = await h.raw("GET", `${BASE}/${j.id}/session/in.txt`, { headers: bearer(j.token) });
    expect(r.status).toBe(403);
    expect(r.headers["x-error-code"]).toBe("NODE_CAPABILITY_EXPIRED");
    expect((await h.raw("PUT", `${BASE}/${j.id}/session/late.txt`, { headers: bearer(j.token), body: "x" })).status).toBe(403);
    expect(existsSync(join(h.services.control.sessionDir(j.id), "late.txt"))).toBe(false);
  });
});
