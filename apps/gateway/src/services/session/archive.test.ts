import { execFileSync } from "node:child_process";
import { linkSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { SESSION_TOKEN_FILE } from "@ce/store";
import { archiveResponse } from "./archive.js";
import { fileHeader, paxRecord, safeName } from "./tar.js";

/*
 * "Download all" as the archive a person extracts: read back by GNU tar (an independent reader),
 * from a session directory holding what a hostile job can leave there.
 */
let dir: string;
let session: string;
const JOB = "0b7e2c1a9f3d";

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "ce-archive-"));
  session = join(dir, "session");
  mkdirSync(session);
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const request = (over: Partial<Parameters<typeof archiveResponse>[0]> = {}) =>
  archiveResponse({ root: session, segments: [], top: JOB, maxBytes: 1 << 20, maxEntries: 1000, head: false, ...over });

async function extract(r: Response): Promise<{ out: string; list: string[] }> {
  const file = join(dir, "a.tar");
  writeFileSync(file, Buffer.from(await r.arrayBuffer()));
  const out = join(dir, "out");
  mkdirSync(out);
  execFileSync("tar", ["-xf", file, "-C", out]);
  const list = execFileSync("tar", ["-tf", file], { encoding: "utf8" }).split("\n").filter(Boolean);
  return { out, list };
}

describe("session archive", () => {
  it("holds the regular files under one top directory, readable by GNU tar, with exact length and headers", async () => {
    writeFileSync(join(session, "out.txt"), "hello\n");
    mkdirSync(join(session, "sub/deeper"), { recursive: true });
    const bin = Buffer.alloc(300_000);
    for (let i = 0; i < bin.length; i++) bin[i] = (i * 7) % 256;
    writeFileSync(join(session, "sub/deeper/data.bin"), bin);
    writeFileSync(join(session, "empty"), "");
    // Over ustar's 100 + 155 bytes: a pax record carries the name.
    const long = `${"d".repeat(120)}/${"f".repeat(150)}.txt`;
    mkdirSync(join(session, "d".repeat(120)));
    writeFileSync(join(session, long), "long\n");
    const r = await request();
    expect(r.headers.get("content-type")).toBe("application/x-tar");
    expect(r.headers.get("content-disposition")).toBe(`attachment; filename="${JOB}.tar"`);
    expect(r.headers.get("x-content-type-options")).toBe("nosniff");
    const length = Number(r.headers.get("content-length"));
    const { out, list } = await extract(r);
    expect(readFileSync(join(dir, "a.tar")).length).toBe(length);
    expect(list.sort()).toEqual([`${JOB}/${long}`, `${JOB}/empty`, `${JOB}/out.txt`, `${JOB}/sub/deeper/data.bin`]);
    expect(readFileSync(join(out, JOB, "out.txt"), "utf8")).toBe("hello\n");
    expect(readFileSync(join(out, JOB, "sub/deeper/data.bin")).equals(bin)).toBe(true);
    expect(readFileSync(join(out, JOB, long), "utf8")).toBe("long\n");
  });

  it("leaves out symlinks, hard links and special files: nothing outside the session gets in", async () => {
    const secret = join(dir, "secret");
    writeFileSync(secret, "host key\n");
    writeFileSync(join(session, "ok"), "ok\n");
    symlinkSync(secret, join(session, "link"));
    symlinkSync(dir, join(session, "linkdir"));
    linkSync(secret, join(session, "hard"));
    execFileSync("mkfifo", [join(session, "fifo")]);
    const { out, list } = await extract(await request());
    expect(list).toEqual([`${JOB}/ok`]);
    expect(readFileSync(join(out, JOB, "ok"), "utf8")).toBe("ok\n");
  });

  it("leaves out the job's bearer token file, which the session never serves", async () => {
    writeFileSync(join(session, "out.txt"), "hello\n");
    writeFileSync(join(session, SESSION_TOKEN_FILE), "eyJ.secret.token\n");
    mkdirSync(join(session, "sub"));
    writeFileSync(join(session, "sub", SESSION_TOKEN_FILE), "a file of the job's own, kept\n");
    const { list } = await extract(await request());
    expect(list.sort()).toEqual([`${JOB}/out.txt`, `${JOB}/sub/${SESSION_TOKEN_FILE}`]);
  });

  it("a subdirectory is archived from there; a file is refused with a reason", async () => {
    mkdirSync(join(session, "res"));
    writeFileSync(join(session, "res/a"), "a");
    writeFileSync(join(session, "top"), "t");
    const r = await request({ segments: ["res"] });
    expect(r.headers.get("content-disposition")).toBe(`attachment; filename="${JOB}-res.tar"`);
    expect((await extract(r)).list).toEqual([`${JOB}/a`]);
    await expect(request({ segments: ["top"] })).rejects.toMatchObject({ status: 400, code: "BAD_ARCHIVE" });
  });

  it("over the byte or entry bound: 507 naming the limit, before any byte", async () => {
    writeFileSync(join(session, "a"), Buffer.alloc(600));
    writeFileSync(join(session, "b"), Buffer.alloc(600));
    await expect(request({ maxBytes: 1000 })).rejects.toMatchObject({
      status: 507,
      code: "ARCHIVE_TOO_LARGE",
      message: expect.stringContaining("gateway.limits.archiveBytes"),
    });
    await expect(request({ maxEntries: 1 })).rejects.toMatchObject({ status: 507, code: "ARCHIVE_TOO_LARGE" });
    const ok = await request({ maxBytes: 1200 });
    expect(ok.status).toBe(200);
  });

  it("HEAD: the headers and length, no body", async () => {
    writeFileSync(join(session, "a"), "abc");
    const r = await request({ head: true });
    expect(r.body).toBeNull();
    expect(Number(r.headers.get("content-length"))).toBe(512 + 512 + 1024);
  });
});

describe("tar headers", () => {
  it("refuses names that would extract outside the directory", () => {
    for (const bad of ["/etc/passwd", "../x", "a/../../x", "a//b", "./a", "", "a\0b"]) {
      expect(safeName(bad), bad).toBe(false);
      expect(() => fileHeader({ name: bad, size: 0, mtimeMs: 0 })).toThrow("unsafe name");
    }
    expect(safeName("job/a/..b/c.")).toBe(true);
  });
  it("a pax record's length counts its own digits", () => {
    for (const n of [1, 80, 89, 90, 95, 990, 995]) {
      const r = paxRecord("path", "x".repeat(n));
      expect(Number(r.toString().split(" ")[0])).toBe(r.length);
    }
  });
});
