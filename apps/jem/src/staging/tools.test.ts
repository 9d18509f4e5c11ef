/**
 * The one way transfer tools start: as the job's account (real account, setpriv), never as root;
 * their private directory is the account's, 0700, written before the hand-over and removed after.
 */
import { lstat, readFile, stat } from "node:fs/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { lookupAccounts } from "@ce/mapping";
import { TestAccounts } from "@ce/mapping/testing";
import { toolRunner, ToolRefused, type ToolAccount } from "./tools.js";

const ROOT = TestAccounts.available();

describe.skipIf(!ROOT)("transfer tool runner (as root)", () => {
  const accounts = new TestAccounts();
  let account: ToolAccount;

  beforeAll(async () => {
    const name = await accounts.add("tl");
    const a = (await lookupAccounts([name])).get(name)!;
    account = {
      uid: a.uid,
      gid: a.gid,
      wrap: (file, args) => ({ file: "setpriv", args: [`--reuid=${a.uid}`, `--regid=${a.gid}`, "--init-groups", "--", file, ...args] }),
      env: (extra) => ({ PATH: "/usr/bin:/bin", USER: name, ...extra }),
    };
  });
  afterAll(() => accounts.remove());

  it("starts the tool as the job's account with only the environment given", async () => {
    const tools = toolRunner(() => Promise.resolve(account));
    const { proc } = await tools.start(
      "/bin/sh",
      ["-c", 'echo "$(id -u):$(id -g) ${X509_USER_PROXY:-none} ${SECRET:-none}"'],
      { X509_USER_PROXY: "/p" },
      {},
    );
    process.env.SECRET = "jem's own";
    try {
      expect(String((await proc).stdout)).toBe(`${account.uid}:${account.gid} /p none`);
    } finally {
      delete process.env.SECRET;
    }
  });

  it("hands the private directory to the account (0700, files 0600) and removes it by descriptor", async () => {
    const tools = toolRunner(() => Promise.resolve(account));
    const dir = await tools.privateDir();
    await dir.write("proxy", "PEM\n");
    await dir.seal();
    const d = await lstat(dir.path);
    const f = await lstat(`${dir.path}/proxy`);
    expect([d.uid, d.gid, d.mode & 0o7777]).toEqual([account.uid, account.gid, 0o700]);
    expect([f.uid, f.mode & 0o7777]).toEqual([account.uid, 0o600]);
    // The parent is root's and traverse-only: the account cannot move its directory away.
    const parent = await stat(dir.path.replace(/\/c$/, ""));
    expect([parent.uid, parent.mode & 0o7777]).toEqual([0, 0o711]);
    const { proc } = await tools.start("/bin/cat", [`${dir.path}/proxy`], {}, {});
    expect(String((await proc).stdout)).toBe("PEM");
    await expect(dir.write("late", "x")).rejects.toThrow(/already handed over/);
    await dir.cleanup();
    await expect(lstat(dir.path.replace(/\/c$/, ""))).rejects.toThrow(/ENOENT/);
    await expect(readFile(`${dir.path}/proxy`)).rejects.toThrow(/ENOENT/);
  });

  it("a root JEM refuses to start a tool for a job without a mapped account, or as uid 0", async () => {
    const none = toolRunner(() => Promise.resolve(undefined));
    await expect(none.start("/bin/true", [], {}, {})).rejects.toThrow(ToolRefused);
    await expect(none.privateDir()).rejects.toThrow(/transfer tools never run as root, and this job has no mapped account/);
    const zero = toolRunner(() => Promise.resolve({ ...account, uid: 0 }));
    await expect(zero.start("/bin/true", [], {}, {})).rejects.toThrow(/never run as root \(uid 0\)/);
    const broken = toolRunner(() => Promise.reject(new Error("account x is not a mapping target")));
    await expect(broken.start("/bin/true", [], {}, {})).rejects.toThrow(/the job's account cannot run transfer tools: account x/);
  });
});
