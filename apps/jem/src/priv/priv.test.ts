import { execFileSync } from "node:child_process";
import {
  chmodSync,
  chownSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { CompiledConfig } from "@ce/config";
import { ControlDir, formatKeyValues } from "@ce/controldir";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TestAccounts } from "@ce/mapping/testing";
import { Privileged, PrivRefused } from "./priv.js";

// The privileged component's refusals and its file handling, with real accounts (root only).
const ROOT = TestAccounts.available();
const ID = "0a1b2c3d-0000-4000-8000-00000000000a";
const uid = (n: string) => Number(execFileSync("id", ["-u", n], { encoding: "utf8" }));
const gid = (n: string) => Number(execFileSync("id", ["-g", n], { encoding: "utf8" }));

describe.skipIf(!ROOT)("the privileged component", () => {
  const accounts = new TestAccounts();
  let dir: string;
  let control: ControlDir;
  let user: string;
  let unlisted: string;
  let system: string;
  let ceAccount: string;

  const config = (rules: Array<Record<string, unknown>>) =>
    ({ mapping: { rules, onNoMatch: "refuse", minUid: 1000 } }) as unknown as CompiledConfig;
  const setLocal = (account: string, u = uid(account), g = gid(account)) =>
    control.write(
      ID,
      "local",
      formatKeyValues([
        ["globalid", ID],
        ["localuser", account],
        ["localuid", u],
        ["localgid", g],
      ]),
    );

  beforeAll(async () => {
    user = await accounts.add("u");
    unlisted = await accounts.add("x");
    system = await accounts.add("s", { system: true });
    ceAccount = await accounts.add("ce");
    dir = mkdtempSync(join(tmpdir(), "ce-priv-"));
    chmodSync(dir, 0o711); // mapped accounts reach session dirs by path
    control = new ControlDir(join(dir, "control"), join(dir, "session"));
    await control.ensureRoots();
    await control.createJobDirs(ID);
  });
  afterAll(async () => {
    rmSync(dir, { recursive: true, force: true });
    await accounts.remove();
  });

  it("refuses to start when mapped accounts could not reach the session root", async () => {
    chmodSync(dir, 0o700);
    try {
      await expect(Privileged.create(config([{ match: "*", user }]), control)).rejects.toThrow(
        `${dir} is not traversable by other users (o+x)`,
      );
    } finally {
      chmodSync(dir, 0o711);
    }
  });

  it("refuses accounts that are not mapping targets, root, system accounts, the CE's own, changed uids, bad ids", async () => {
    const priv = (await Privileged.create(config([{ match: "*", pool: { accounts: [user, system, "root"] } }]), control))!;
    await setLocal(user);
    expect(await priv.accountFor(ID)).toEqual({ account: user, uid: uid(user), gid: gid(user) });
    await expect(priv.accountFor("../../etc")).rejects.toThrow(PrivRefused);
    await setLocal(unlisted);
    await expect(priv.accountFor(ID)).rejects.toThrow(`account ${unlisted} is not a mapping target of the current configuration`);
    await setLocal(system);
    await expect(priv.accountFor(ID)).rejects.toThrow(/below mapping.minUid 1000/);
    await setLocal("root", 0, 0);
    await expect(priv.accountFor(ID)).rejects.toThrow("account root is root (uid 0)");
    await setLocal(user, uid(user) + 1);
    await expect(priv.accountFor(ID)).rejects.toThrow(/is uid \d+\/gid \d+ now/);
    await setLocal(user);
    await expect(priv.accountFor(ID, { account: unlisted, uid: uid(unlisted), gid: 0, groups: [], rule: "x" })).rejects.toThrow(
      "the local file and the job record name different accounts",
    );
    await control.write(ID, "local", "globalid=x\n");
    await expect(priv.accountFor(ID)).rejects.toThrow("has no mapped account");

    // The CE's own account: whoever owns the control dir.
    chownSync(control.root, uid(ceAccount), gid(ceAccount));
    try {
      const p2 = (await Privileged.create(config([{ match: "*", user: ceAccount }]), control))!;
      await setLocal(ceAccount);
      await expect(p2.accountFor(ID)).rejects.toThrow(/is the CE's own account/);
    } finally {
      chownSync(control.root, 0, 0);
    }
  });

  it("prepares a session of plain files and directories with the modes chown/chmod -R and setgid gave", async () => {
    const id2 = "0a1b2c3d-0000-4000-8000-00000000000b";
    await control.createJobDirs(id2);
    await control.write(
      id2,
      "local",
      formatKeyValues([
        ["globalid", id2],
        ["localuser", user],
        ["localuid", uid(user)],
        ["localgid", gid(user)],
      ]),
    );
    const priv = (await Privileged.create(config([{ match: "*", user }]), control))!;
    const as = await priv.accountFor(id2);
    const session = control.sessionDir(id2);
    mkdirSync(join(session, "sub", "deep"), { recursive: true, mode: 0o755 });
    writeFileSync(join(session, "sub", "deep", "in.txt"), "input\n", { mode: 0o644 });
    writeFileSync(join(session, "run.sh"), "#!/bin/sh\n", { mode: 0o755 });
    writeFileSync(join(session, "private"), "x", { mode: 0o600 });
    await priv.prepareSession(id2, as);
    const ceGid = statSync(control.root).gid;
    for (const [p, mode] of [
      [session, 0o2770],
      [join(session, "sub"), 0o2770],
      [join(session, "sub", "deep"), 0o2770],
      [join(session, "sub", "deep", "in.txt"), 0o660],
      [join(session, "run.sh"), 0o770],
      [join(session, "private"), 0o660],
    ] as const) {
      expect([p, statSync(p).uid, statSync(p).gid, statSync(p).mode & 0o7777]).toEqual([p, as.uid, ceGid, mode]);
    }
    // A file the job may write (group CE, setgid dirs): what the job creates there stays the CE's group.
    execFileSync("setpriv", [
      `--reuid=${as.uid}`,
      `--regid=${as.gid}`,
      "--init-groups",
      "--",
      "/bin/sh",
      "-c",
      'echo out > "$1"/sub/out.txt',
      "t",
      session,
    ]);
    expect(statSync(join(session, "sub", "out.txt")).gid).toBe(ceGid);
  });

  it("hands the session over without following links, and collects batch files without following links", async () => {
    const priv = (await Privileged.create(config([{ match: "*", user }]), control))!;
    await setLocal(user);
    const as = await priv.accountFor(ID);
    const session = control.sessionDir(ID);
    const outside = join(dir, "outside.txt");
    writeFileSync(outside, "secret\n", { mode: 0o600 });
    mkdirSync(join(session, "sub"));
    writeFileSync(join(session, "sub", "in.txt"), "input\n", { mode: 0o644 });
    symlinkSync(outside, join(session, "link"));
    await priv.prepareSession(ID, as);
    expect(statSync(session).uid).toBe(as.uid);
    expect(statSync(session).mode & 0o7777).toBe(0o2770);
    expect(statSync(join(session, "sub")).mode & 0o7777).toBe(0o2770);
    expect(statSync(join(session, "sub", "in.txt")).mode & 0o7777).toBe(0o660);
    expect(lstatSync(join(session, "link")).uid).toBe(0); // links are left alone, and what they name too
    expect(statSync(outside).uid).toBe(0);
    expect(statSync(outside).mode & 0o777).toBe(0o600);

    const batch = await priv.prepareBatchDir(ID, as);
    expect(batch).toBe(`${session}.lrms`);
    expect(statSync(batch).uid).toBe(as.uid);
    expect(statSync(batch).mode & 0o7777).toBe(0o2770);
    // The control dir stays the CE's alone: nothing in it is opened up for the batch job.
    expect(statSync(control.root).mode & 0o777).toBe(0o700);
    expect(statSync(control.jobDir(ID)).mode & 0o777).toBe(0o700);
    const proxy = await priv.writeFile(ID, as, "proxy", "PEM", 0o600);
    expect(statSync(proxy).uid).toBe(as.uid);
    expect(statSync(proxy).mode & 0o777).toBe(0o600);

    // The job links its lrms_done / diag to a CE secret: nothing is copied, nothing read.
    symlinkSync(outside, join(batch, "lrms_done"));
    expect(await priv.collect(ID)).toBe(false);
    rmSync(join(batch, "lrms_done"));
    execFileSync("mkfifo", [join(batch, "lrms_done")]);
    expect(await priv.collect(ID)).toBe(false); // a FIFO: not a regular file, and no hang
    rmSync(join(batch, "lrms_done"));
    writeFileSync(join(batch, "lrms_done"), "0 \n");
    symlinkSync(outside, join(batch, "diag"));
    writeFileSync(join(batch, "comment"), "wrapper output\n");
    expect(await priv.collect(ID)).toBe(true);
    expect(await control.read(ID, "lrms_done")).toBe("0 \n");
    expect(await control.read(ID, "diag")).toBeUndefined();
    expect(readFileSync(control.file(ID, "comment"), "utf8")).toBe("wrapper output\n");

    // A hard link to a file the account can reach is refused too; a huge comment costs its tail only.
    rmSync(join(batch, "diag"));
    writeFileSync(join(batch, "other"), "exitcode=0\n");
    execFileSync("ln", [join(batch, "other"), join(batch, "diag")]);
    writeFileSync(join(batch, "comment"), `${"x".repeat(3 * 1024 * 1024)}end of output\n`);
    await control.remove(ID, "diag");
    expect(await priv.collect(ID)).toBe(true);
    expect(await control.read(ID, "diag")).toBeUndefined();
    const comment = readFileSync(control.file(ID, "comment"), "utf8");
    expect(comment.length).toBe(1024 * 1024);
    expect(comment.endsWith("end of output\n")).toBe(true);
    chmodSync(outside, 0o600);
  });
});
