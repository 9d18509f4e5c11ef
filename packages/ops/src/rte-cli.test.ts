import { execFile } from "node:child_process";
import { lstatSync, mkdirSync, mkdtempSync, readFileSync, readlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { beforeAll, describe, expect, it } from "vitest";

const run = promisify(execFile);
const root = fileURLToPath(new URL("../../..", import.meta.url));
let state: string;

/** `ceadm` as `pnpm ceadm` runs it; `rte` needs no Redis (an unreachable URL proves it). */
async function ceadm(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const env = {
    ...process.env,
    CE_CONFIG: "",
    CE__PATHS__STATE_DIR: state,
    CE__REDIS__URL: "redis://127.0.0.1:1",
    CE__JOBS__RUNTIME_ENVIRONMENTS: '["APPS/CONFIGURED"]',
  };
  try {
    const { stdout, stderr } = await run(process.execPath, ["--import", "tsx", "packages/ops/src/cli.ts", ...args], { cwd: root, env });
    return { code: 0, stdout, stderr };
  } catch (e) {
    const err = e as { code: number; stdout: string; stderr: string };
    return { code: err.code, stdout: err.stdout, stderr: err.stderr };
  }
}

beforeAll(() => {
  state = mkdtempSync(join(tmpdir(), "ce-rte-cli-"));
  mkdirSync(join(state, "rte", "APPS"), { recursive: true });
  writeFileSync(join(state, "rte", "APPS", "HEP-1.0"), "# param:SITE_NAME:string:none:The site's name\ntrue\n");
});

describe("ceadm rte", () => {
  it("enables, makes default, sets parameters, lists and disables, in ARC's control-dir layout", async () => {
    expect((await ceadm("rte", "enable", "APPS/HEP-1.0")).stdout).toContain(
      `APPS/HEP-1.0 enabled: ${join(state, "rte", "APPS", "HEP-1.0")}`,
    );
    const link = join(state, "control", "rte", "enabled", "APPS", "HEP-1.0");
    expect(lstatSync(link).isSymbolicLink()).toBe(true);
    expect(readlinkSync(link)).toBe(join(state, "rte", "APPS", "HEP-1.0"));

    expect((await ceadm("rte", "params", "APPS/HEP-1.0", "SITE_NAME=my site", "X=1")).stdout).toMatch(
      /^SITE_NAME\s+my site\s+none\s+The site's name$/m,
    );
    expect(readFileSync(join(state, "control", "rte", "params", "APPS", "HEP-1.0"), "utf8")).toBe('SITE_NAME="my site"\nX="1"\n');
    expect((await ceadm("rte", "params", "APPS/HEP-1.0", "X=")).stdout).not.toMatch(/^X\s/m);

    expect((await ceadm("rte", "default", "APPS/HEP-1.0")).code).toBe(0);
    const list = JSON.parse((await ceadm("--json", "rte", "list")).stdout) as Array<{
      name: string;
      enabled: boolean;
      default: boolean;
      script?: string;
    }>;
    expect(list).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ name: "APPS/HEP-1.0", enabled: true, default: true }),
        expect.objectContaining({ name: "APPS/CONFIGURED", enabled: true, default: false }),
      ]),
    );
    expect((await ceadm("rte", "list")).stdout).toMatch(/^APPS\/HEP-1\.0\s+default\s/m);

    expect((await ceadm("rte", "disable", "APPS/HEP-1.0")).stdout).toContain("APPS/HEP-1.0: disabled");
    const after = JSON.parse((await ceadm("--json", "rte", "list")).stdout) as Array<{ name: string; enabled: boolean }>;
    expect(after.find((r) => r.name === "APPS/HEP-1.0")).toMatchObject({ enabled: false });
  });

  it("refuses unknown scripts, bad names and bad parameters with a reason", async () => {
    const missing = await ceadm("rte", "enable", "NOPE/X");
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain("no runtime environment script for NOPE/X");
    const bad = await ceadm("rte", "enable", "../etc/passwd");
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain("invalid runtime environment name");
    const param = await ceadm("rte", "params", "APPS/HEP-1.0", "not a name=1");
    expect(param.code).toBe(1);
    expect(param.stderr).toContain("parameter must be NAME=value");
    expect((await ceadm("rte", "enable")).code).toBe(2);
  });
});
