import { execFile } from "node:child_process";
import { chmodSync, chownSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import YAML from "yaml";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { TestAccounts } from "@ce/mapping/testing";
import { createCA, issueHostCert, writeCADir } from "@ce/x509/testing";
import { main } from "../cli.js";

const run = promisify(execFile);
const root = fileURLToPath(new URL("../../../..", import.meta.url));
const DAY = 86_400_000;
const asRoot = TestAccounts.available();

/**
 * The "Done when" case of the packaging issue: a configuration with an expired host certificate, a
 * 0700 cache directory, a mapping to an account that does not exist and a world-writable control
 * directory. `ceadm doctor` names each with its fix and exits 1; mended, it names none and exits 0;
 * the JEM and the gateway refuse to start with the same line. Real accounts (useradd), real Redis,
 * real files: root only (CI runs as root).
 */
describe.skipIf(!asRoot)("ceadm doctor", () => {
  const accounts = new TestAccounts();
  const dir = mkdtempSync(join(tmpdir(), "ce-doctor-"));
  const file = join(dir, "ce.yaml");
  const ca = createCA({ dn: "/DC=org/DC=doctor/CN=Doctor CA" });
  const host = "ce.doctor-test.org";
  let missing: string;
  const writeConfig = (mappedUser: string, missingUser: string) => {
    const redisUsers = inject("redisUsers");
    for (const role of ["gateway", "jem"] as const) writeFileSync(join(dir, `redis-${role}`), redisUsers[role].password, { mode: 0o600 });
    const cfg = {
      endpoint: { url: `https://${host}:443/arex` },
      paths: { stateDir: dir, controlDir: join(dir, "control"), sessionRoot: join(dir, "session") },
      gateway: { tls: { certFile: join(dir, "hostcert.pem"), keyFile: join(dir, "hostkey.pem") } },
      auth: { caDir: join(dir, "ca"), voms: { dir: join(dir, "vomsdir") } },
      redis: {
        url: inject("redisUrl").replace(/\/\/[^@/]*@/, "//"),
        prefix: "{doctor}",
        users: { gateway: { passwordFile: join(dir, "redis-gateway") }, jem: { passwordFile: join(dir, "redis-jem") } },
      },
      // A full test disk is not this test's business.
      staging: { cache: { dirs: [{ path: join(dir, "cache") }], highWatermarkPercent: 100 } },
      mapping: {
        rules: [
          { name: "everyone", match: "*", user: mappedUser },
          { name: "nobody", match: "dn:/CN=nobody", user: missingUser },
        ],
      },
    };
    writeFileSync(file, YAML.stringify(cfg));
  };
  const hostCert = (notAfter: Date) => {
    const cred = issueHostCert(ca, { hostnames: [host], notBefore: new Date(notAfter.getTime() - 400 * DAY), notAfter });
    writeFileSync(join(dir, "hostcert.pem"), cred.certPem);
    writeFileSync(join(dir, "hostkey.pem"), cred.keyPem, { mode: 0o600 });
  };
  const doctor = async () => {
    const lines: string[] = [];
    const code = await main(["doctor", "--config", file], (s) => lines.push(s));
    return { code, out: lines.join("\n") };
  };

  beforeAll(async () => {
    chmodSync(dir, 0o755);
    const mapped = await accounts.add("job");
    missing = `${accounts.prefix}gone`;
    writeCADir(join(dir, "ca"), [ca]);
    mkdirSync(join(dir, "control"), { mode: 0o777 });
    chmodSync(join(dir, "control"), 0o777);
    mkdirSync(join(dir, "session"), { mode: 0o711 });
    mkdirSync(join(dir, "cache"), { mode: 0o700 });
    hostCert(new Date(Date.now() - DAY));
    writeConfig(mapped, missing);
  });
  afterAll(async () => {
    await accounts.remove();
    rmSync(dir, { recursive: true, force: true });
  });

  it("names the expired certificate, the 0700 cache, the missing account and the world-writable control dir, each with its fix; exit 1", async () => {
    const { code, out } = await doctor();
    expect(code).toBe(1);
    expect(out).toMatch(
      /FATAL {3}host-cert: host certificate \S+hostcert\.pem expired on \d{4}-\d\d-\d\d\n\s+fix: renew the host certificate/,
    );
    expect(out).toMatch(
      new RegExp(
        `FATAL {3}directories: \\S+/cache \\(staging\\.cache\\.dirs\\[0\\], mode 0700, uid 0\\) cannot be traversed by the mapped account ${accounts.prefix}job: every job with a cached input fails.*\\n\\s+fix: chmod o\\+x \\S+/cache`,
      ),
    );
    expect(out).toMatch(
      new RegExp(`FATAL {3}accounts: mapping\\.rules\\[1\\] "nobody": account ${missing} does not exist on this host\\n\\s+fix: create it`),
    );
    expect(out).toMatch(
      /FATAL {3}directories: \S+\/control \(paths\.controlDir\) is world-writable \(mode 0777\).*\n\s+fix: chmod o-w \S+\/control/,
    );
    // Nothing else: the rest of this configuration is sound.
    expect(out.match(/^(FATAL|WARNING)/gm)).toHaveLength(4);
  });

  it("--json lists the same problems with severity and fix", async () => {
    const lines: string[] = [];
    expect(await main(["--json", "doctor", "--config", file], (s) => lines.push(s))).toBe(1);
    const r = JSON.parse(lines.join("\n")) as { ok: boolean; problems: { check: string; severity: string; fix: string }[] };
    expect(r.ok).toBe(false);
    expect(r.problems.map((p) => p.check).sort()).toEqual(["accounts", "directories", "directories", "host-cert"]);
    expect(r.problems.every((p) => p.severity === "fatal" && p.fix.length > 0)).toBe(true);
  });

  it("the JEM and the gateway refuse to start with the same line", async () => {
    const { out } = await doctor();
    const first = out.split("\n")[0]!.replace(/^FATAL {3}/, "");
    for (const app of ["jem", "gateway"]) {
      const r = await run(process.execPath, ["--import", "tsx", `apps/${app}/src/main.ts`], {
        cwd: root,
        env: { ...process.env, CE_CONFIG: file },
        timeout: 60_000,
      }).then(
        () => ({ code: 0, stderr: "" }),
        (e: { code: number; stderr: string }) => e,
      );
      expect(r.code, app).toBe(1);
      expect(r.stderr, app).toContain(`${app}: cannot start: ${first}`);
    }
  }, 120_000);

  it("names none of them once mended: exit 0", async () => {
    hostCert(new Date(Date.now() + 365 * DAY));
    chmodSync(join(dir, "cache"), 0o755);
    chmodSync(join(dir, "control"), 0o711);
    await accounts.add("gone");
    const { code, out } = await doctor();
    expect(out).toBe("doctor: no problems found");
    expect(code).toBe(0);
  });

  it("a certificate ending within 30 days and a session root owned by a mapped account are named too", async () => {
    hostCert(new Date(Date.now() + 10 * DAY));
    const uid = Number((await run("id", ["-u", `${accounts.prefix}job`])).stdout.trim());
    chownSync(join(dir, "session"), uid, 0);
    const { code, out } = await doctor();
    expect(code).toBe(1);
    expect(out).toMatch(/WARNING host-cert: host certificate \S+ expires on \S+, within 30 days/);
    expect(out).toMatch(
      /FATAL {3}directories: \S+\/session \(paths\.sessionRoot, mode 0711, uid \d+ gid 0\) can be changed by the mapped account/,
    );
    chownSync(join(dir, "session"), 0, 0);
  });
});
