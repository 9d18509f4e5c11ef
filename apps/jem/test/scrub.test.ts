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
    spawnSync("chattr", ["-i", join(tmpB, "stuck")]);
    spawnSync("pkill", ["-KILL", "-u", acct]);
    await accounts.remove();
  });

  const as = (cmd: string) =>
    spawnSync("setpriv", [`--reuid=${uid}`, `--regid=${gid}`, "--clear-groups", "--", "sh", "-c", cmd], { encoding: "utf8", cwd: "/" });
  const opts = () => ({ config, log, tempDirs: [tmpA, tmpB], cronSpools: [cron], atSpools: [at] });

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
});
