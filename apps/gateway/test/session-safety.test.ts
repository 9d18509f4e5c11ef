import { execFileSync } from "node:child_process";
import { lstat, mkdir, mkdtemp, readdir, readFile, readlink, rm, stat, symlink, writeFile } from "node:fs/promises";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { type Harness, startHarness } from "./session-harness.js";
import { waitFor } from "@ce/testing";

/**
 * A job owns its session directory and can plant symlinks (to /etc/passwd, to another job's
 * session, to a directory outside) and FIFOs. None of them may be followed by GET, PUT, DELETE,
 * listing or PROPFIND (SECURITY.md; the lesson of CVE-2023-41914).
 */
let h: Harness;
let outside: string;
let victim: string;
let attacker: string;
const SECRET = "top secret of another job\n";

beforeAll(async () => {
  h = await startHarness(inject("redisUrl"));
  outside = await mkdtemp(join(tmpdir(), "ce-outside-"));
  await writeFile(join(outside, "target.txt"), "outside file\n");
  victim = await h.newJob({}, "/CN=Victim");
  await writeFile(join(h.services.control.sessionDir(victim), "secret.txt"), SECRET);
  attacker = await h.newJob();
  const s = h.services.control.sessionDir(attacker);
  await symlink("/etc/passwd", join(s, "passwd"));
  await symlink(join(outside, "target.txt"), join(s, "outfile"));
  await symlink(outside, join(s, "outdir"));
  await symlink(h.services.control.sessionDir(victim), join(s, "victim"));
  await symlink("../" + victim, join(s, "victim-rel"));
  await mkdir(join(s, "real"));
  await writeFile(join(s, "real", "ok.txt"), "fine");
  execFileSync("mkfifo", [join(s, "fifo")]);
});
afterAll(async () => {
  await h?.close();
  if (outside) await rm(outside, { recursive: true, force: true });
});

const sess = (rel: string) => `${h.base}/${attacker}/session${rel}`;

describe("planted symlinks and special files", () => {
  it("GET/HEAD never read through a symlink (final or intermediate component)", async () => {
    for (const rel of ["/passwd", "/outfile", "/victim/secret.txt", "/victim-rel/secret.txt", "/outdir/target.txt", "/victim", "/outdir"]) {
      for (const m of ["GET", "HEAD"]) {
        const res = await h.raw(m, sess(rel));
        expect(res.status, `${m} ${rel}`).toBe(404);
        expect(res.text).not.toContain("root:");
        expect(res.text).not.toContain("secret");
        expect(res.text).not.toContain("outside file");
      }
    }
  });

  it("a FIFO is not opened (no hang) and is 404", async () => {
    const t = Date.now();
    expect((await h.raw("GET", sess("/fifo"))).status).toBe(404);
    expect(Date.now() - t).toBeLessThan(2000);
  });

  it("listings and PROPFIND omit symlinks and special files", async () => {
    const json = JSON.parse((await h.raw("GET", sess("/"), { headers: { accept: "application/json" } })).text);
    expect(json).toEqual({ file: [], dir: ["real"] });
    const dav = await h.raw("PROPFIND", sess(""), { headers: { depth: "1" } });
    expect(dav.status).toBe(207);
    expect(dav.text).toContain(`${sess("")}/real/`);
    for (const n of ["passwd", "outfile", "outdir", "victim", "fifo"]) expect(dav.text).not.toContain(`/session/${n}`);
    for (const rel of ["/victim", "/outdir", "/victim/secret.txt"]) {
      expect((await h.raw("PROPFIND", sess(rel), { headers: { depth: "1" } })).status, rel).toBe(404);
    }
  });

  it("PUT never writes through a symlink: 409, targets untouched", async () => {
    for (const rel of ["/outfile", "/passwd", "/victim/secret.txt", "/victim/new.txt", "/outdir/new.txt", "/victim-rel/x/y.txt"]) {
      const res = await h.raw("PUT", sess(rel), { body: "pwned", headers: { accept: "application/json" } });
      expect(res.status, rel).toBe(409);
      expect(JSON.parse(res.text).reason).toMatch(/symbolic link/);
    }
    expect(await readFile(join(outside, "target.txt"), "utf8")).toBe("outside file\n");
    expect(await readFile(join(h.services.control.sessionDir(victim), "secret.txt"), "utf8")).toBe(SECRET);
    await expect(stat(join(h.services.control.sessionDir(victim), "new.txt"))).rejects.toThrow();
    await expect(stat(join(outside, "new.txt"))).rejects.toThrow();
    const fifo = await h.raw("PUT", sess("/fifo"), { body: "x" });
    expect(fifo.status).toBe(409);
  });

  it("DELETE removes the link itself at most, never its target", async () => {
    expect((await h.raw("DELETE", sess("/victim/secret.txt"))).status).toBe(404);
    expect((await h.raw("DELETE", sess("/outdir/target.txt"))).status).toBe(404);
    expect(await readFile(join(h.services.control.sessionDir(victim), "secret.txt"), "utf8")).toBe(SECRET);
    expect((await h.raw("DELETE", sess("/outfile"))).status).toBe(202);
    await expect(lstat(join(h.services.control.sessionDir(attacker), "outfile"))).rejects.toThrow();
    expect(await readFile(join(outside, "target.txt"), "utf8")).toBe("outside file\n");
    expect((await h.raw("DELETE", sess("/victim"))).status).toBe(202);
    expect(await readFile(join(h.services.control.sessionDir(victim), "secret.txt"), "utf8")).toBe(SECRET);
  });

  it("recursive DELETE of a directory holding symlinks removes the links, not what they point to", async () => {
    const id = await h.newJob();
    const s = h.services.control.sessionDir(id);
    await mkdir(join(s, "d", "e"), { recursive: true });
    await symlink(outside, join(s, "d", "e", "to-outside"));
    await symlink(h.services.control.sessionDir(victim), join(s, "d", "to-victim"));
    expect((await h.raw("DELETE", `${h.base}/${id}/session/d`)).status).toBe(202);
    await expect(stat(join(s, "d"))).rejects.toThrow();
    expect(await readFile(join(outside, "target.txt"), "utf8")).toBe("outside file\n");
    expect(await readFile(join(h.services.control.sessionDir(victim), "secret.txt"), "utf8")).toBe(SECRET);
    // And the whole session root, with a link in it.
    await symlink(outside, join(s, "again"));
    expect((await h.raw("DELETE", `${h.base}/${id}/session`)).status).toBe(202);
    await expect(stat(s)).rejects.toThrow();
    expect(await readFile(join(outside, "target.txt"), "utf8")).toBe("outside file\n");
  });

  it("a directory swapped for a symlink is not traversed (the check is on the opened descriptor)", async () => {
    const id = await h.newJob();
    const s = h.services.control.sessionDir(id);
    await h.raw("PUT", `${h.base}/${id}/session/w/f.txt`, { body: "1" });
    await rm(join(s, "w"), { recursive: true });
    await symlink(outside, join(s, "w"));
    expect(await readlink(join(s, "w"))).toBe(outside);
    expect((await h.raw("PUT", `${h.base}/${id}/session/w/f.txt`, { body: "2" })).status).toBe(409);
    expect((await h.raw("GET", `${h.base}/${id}/session/w/target.txt`)).status).toBe(404);
    await expect(stat(join(outside, "f.txt"))).rejects.toThrow();
  });
});

const sessOf = (id: string, rel = "") => `${h.base}/${id}/session${rel}`;
const putTo = (id: string, rel: string, body: string) =>
  h.raw("PUT", sessOf(id, rel), { body, headers: { "content-length": String(Buffer.byteLength(body)) } });

describe("E6 path safety (SECURITY.md; the lesson of CVE-2023-41914)", () => {
  it("rejects '..' above the root, encoded dots, encoded separators, NUL and backslashes with 400", async () => {
    const id = await h.newJob();
    await putTo(id, "/a/f", "x");
    const cases: Array<[string, RegExp]> = [
      ["/a/../../session/a/f", /climbs above/],
      ["/../session/a/f", /climbs above/],
      ["/a/%2e%2e/a/f", /encoded dot/],
      ["/a/%2E./a/f", /encoded dot/],
      ["/a%2ff", /encoded slash/],
      ["/a%2Ff", /encoded slash/],
      ["/a%5cf", /encoded slash/],
      ["/a/f%00.txt", /NUL/],
      ["/a/%ff", /percent-encoding/],
    ];
    for (const [rel, reason] of cases) {
      for (const method of ["GET", "PUT", "DELETE", "PROPFIND"]) {
        const res = await h.raw(method, sessOf(id, rel), {
          headers: { accept: "application/json" },
          ...(method === "PUT" ? { body: "x" } : {}),
        });
        expect(res.status, `${method} ${rel}`).toBe(400);
        expect(JSON.parse(res.text).reason, `${method} ${rel}`).toMatch(reason);
      }
    }
    expect((await h.raw("GET", sessOf(id, "/a\\f"))).status).toBe(400);
    // A '..' that stays inside the directory is resolved, as A-REX does.
    expect((await h.raw("GET", sessOf(id, "/a/../a/f"))).text).toBe("x");
    expect(await readFile(join(h.services.control.sessionDir(id), "a", "f"), "utf8")).toBe("x");
  });

  it("dot segments before the session part of the URL are refused, not resolved", async () => {
    const id = await h.newJob();
    await putTo(id, "/f", "x");
    const res = await h.raw("GET", `${h.base}/${id}/x/../session/f`);
    expect(res.status).toBe(400);
  });
});

describe("E6 resources are released when clients go away", () => {
  const openFds = async () => (await readdir("/proc/self/fd")).length;

  it("an aborted download or upload leaves no open file descriptor behind", async () => {
    const id = await h.newJob();
    await writeFile(join(h.services.control.sessionDir(id), "large.bin"), Buffer.alloc(8 * 1024 * 1024, 7));
    const before = await openFds();
    await new Promise<void>((resolve) => {
      const req = request({ host: "127.0.0.1", port: h.port, path: sessOf(id, "/large.bin"), agent: false }, (res) => {
        res.once("data", () => {
          res.destroy();
          resolve();
        });
      });
      req.end();
    });
    await new Promise<void>((resolve) => {
      const req = request({
        host: "127.0.0.1",
        port: h.port,
        method: "PUT",
        path: sessOf(id, "/partial.bin"),
        agent: false,
        headers: { "content-length": "100000" },
      });
      req.on("error", () => resolve());
      req.write(Buffer.alloc(1000, 1), () =>
        setTimeout(() => {
          req.destroy();
          resolve();
        }, 100),
      );
    });
    // The server sees the abort asynchronously and then closes the partial file.
    await waitFor("the aborted upload's descriptors closed", async () => (await openFds()) <= before, 5_000);
    expect((await h.services.control.read(id, "input_status")) ?? "").not.toContain("/partial.bin");
    // The server is still fine.
    expect((await h.raw("GET", sessOf(id, "/large.bin"), { headers: { range: "bytes=0-3" } })).body).toEqual(Buffer.from([7, 7, 7, 7]));
  });

  it("PUT after DELETE of the whole session directory is refused: the CE never recreates it with its own owner and mode", async () => {
    const id = await h.newJob();
    await putTo(id, "/a", "1");
    expect((await h.raw("DELETE", sessOf(id))).status).toBe(202);
    for (const path of ["/b/c", "/a"]) {
      const r = await h.raw("PUT", sessOf(id, path), { body: "2", headers: { accept: "application/json" } });
      expect(r.status).toBe(409);
      expect(r.text).toMatch(/session directory of this job was deleted; it is not recreated/);
    }
    await expect(stat(h.services.control.sessionDir(id))).rejects.toThrow(/ENOENT/);
  });
});
