import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { promisify } from "node:util";

const run = promisify(execFile);

/**
 * Real local accounts for tests (CI runs as root): `useradd` with a random prefix so parallel
 * suites never collide, `remove` deletes exactly those. /etc/passwd may be locked by another
 * suite's useradd for a moment: retried.
 */
export class TestAccounts {
  readonly prefix = `cm${randomBytes(3).toString("hex")}`;
  private readonly created: string[] = [];

  static available(): boolean {
    return process.getuid?.() === 0;
  }

  /** Creates `<prefix><suffix>`; `system` gives a uid below 1000. Returns the name. */
  async add(suffix: string, opts: { system?: boolean; groups?: string[] } = {}): Promise<string> {
    const name = `${this.prefix}${suffix}`;
    const args = ["-M", "-N", "-g", "users", "-s", "/usr/sbin/nologin"];
    if (opts.system) args.push("-r");
    if (opts.groups?.length) args.push("-G", opts.groups.join(","));
    await retry(() => run("useradd", [...args, name]));
    this.created.push(name);
    return name;
  }

  /** A group named `<prefix><suffix>`. */
  async group(suffix: string): Promise<string> {
    const name = `${this.prefix}${suffix}`;
    await retry(() => run("groupadd", [name]));
    this.created.push(`group:${name}`);
    return name;
  }

  async remove(): Promise<void> {
    for (const n of this.created.reverse()) {
      if (n.startsWith("group:")) await retry(() => run("groupdel", [n.slice(6)])).catch(() => undefined);
      else await retry(() => run("userdel", [n])).catch(() => undefined);
    }
    this.created.length = 0;
  }
}

async function retry<T>(fn: () => Promise<T>): Promise<T> {
  for (let i = 0; ; i++) {
    try {
      return await fn();
    } catch (e) {
      // useradd/userdel exit 10 (or say "cannot lock") while another one holds /etc/passwd.
      const msg = String((e as { stderr?: string }).stderr ?? e);
      if (i >= 50 || !/lock|try again/i.test(msg)) throw e;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}
