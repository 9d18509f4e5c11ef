import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { redisAclRules } from "@ce/config";
import { buildDeb } from "./package-deb.js";

const run = promisify(execFile);
const ROOT = join(import.meta.dirname, "..");
const exec = (file: string, args: string[], opts: { env?: NodeJS.ProcessEnv; cwd?: string } = {}) =>
  run(file, args, { ...opts, maxBuffer: 64 * 1024 * 1024 }).then(
    (r) => ({ code: 0, stdout: r.stdout, stderr: r.stderr }),
    (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, stdout: e.stdout, stderr: e.stderr }),
  );

/**
 * The fast half of the packaging tests (CI runs it; the site test in a fresh Debian root,
 * package-deb.site.test.ts, is opt-in): `pnpm package`'s .deb holds what docs/operations.md
 * "Install on a head node" relies on, `systemd-analyze verify` accepts its units, and its bundles
 * run from the unpacked tree alone (no node_modules, no TypeScript loader) and refuse the shipped
 * configuration until the site sets the endpoint and certificates.
 */
describe("pnpm package: the Debian package", () => {
  const out = mkdtempSync(join(tmpdir(), "ce-deb-test-"));
  const tree = join(out, "tree");
  let deb: string;
  let files: string[];
  beforeAll(async () => {
    deb = await buildDeb({ outDir: out, version: "1.2.3" });
    await run("dpkg-deb", ["-x", deb, tree]);
    files = (await run("dpkg-deb", ["-c", deb], { maxBuffer: 64 * 1024 * 1024 })).stdout
      .trim()
      .split("\n")
      .map((l) => l.split(/\s+/).slice(5).join(" ").replace(/^\./, ""));
  }, 600_000);
  afterAll(() => rmSync(out, { recursive: true, force: true }));

  it("is named ce-rest_<version>_<arch>.deb and declares its dependencies and conffiles", async () => {
    const arch = (await run("dpkg", ["--print-architecture"])).stdout.trim();
    expect(deb).toBe(join(out, `ce-rest_1.2.3_${arch}.deb`));
    const info = (await run("dpkg-deb", ["-I", deb])).stdout;
    const major = Number(process.versions.node.split(".")[0]);
    expect(info).toMatch(new RegExp(`Depends: nodejs \\(>= ${major}\\), nodejs \\(<< ${major + 1}\\), redis-server`));
    expect(info).toMatch(/Recommends: slurm-client/);
    expect((await run("dpkg-deb", ["-f", deb, "Package", "Version", "Architecture"])).stdout).toBe(
      `Package: ce-rest\nVersion: 1.2.3\nArchitecture: ${arch}\n`,
    );
    expect(
      readFileSync(join(await control(), "conffiles"), "utf8")
        .split("\n")
        .filter(Boolean)
        .sort(),
    ).toEqual(["/etc/ce/ce.yaml", "/etc/redis/redis-ce.conf"]);
  });

  const control = async () => {
    const dir = join(out, "DEBIAN");
    await run("dpkg-deb", ["-e", deb, dir]);
    return dir;
  };

  it("holds the units, ceadm, the conffiles and the bundles, and no node_modules tree or TypeScript", () => {
    for (const f of [
      "/lib/systemd/system/ce-gateway.service",
      "/lib/systemd/system/ce-jem.service",
      "/usr/bin/ceadm",
      "/etc/ce/ce.yaml",
      "/etc/redis/redis-ce.conf",
      "/usr/lib/ce-rest/gateway/main.js",
      "/usr/lib/ce-rest/gateway/file-worker.js",
      "/usr/lib/ce-rest/jem/main.js",
      "/usr/lib/ce-rest/jem/better_sqlite3.node",
      "/usr/lib/ce-rest/jem/backends/fork/submit",
      "/usr/lib/ce-rest/jem/bull-board-ui/dist/index.ejs",
      "/usr/lib/ce-rest/ceadm/main.js",
    ])
      expect(files, f).toContain(f);
    expect(files.filter((f) => /node_modules|\.ts$|\.map$/.test(f))).toEqual([]);
    const units = ["ce-gateway.service", "ce-jem.service"].map((u) => readFileSync(join(tree, "lib/systemd/system", u), "utf8"));
    for (const text of [...units, readFileSync(join(tree, "usr/bin/ceadm"), "utf8")]) expect(text).not.toMatch(/tsx|--import/);
  });

  it("systemd-analyze verify accepts every unit, without a warning", async () => {
    const dir = join(tree, "lib/systemd/system");
    for (const unit of ["ce-gateway.service", "ce-jem.service"]) {
      const r = await exec("systemd-analyze", ["verify", join(dir, unit)]);
      expect({ unit, code: r.code, stderr: r.stderr }).toEqual({ unit, code: 0, stderr: "" });
    }
  });

  it("the units are hardened as docs/security.md says: the gateway unprivileged, the JEM with the named capabilities only", () => {
    const unit = (u: string) => readFileSync(join(tree, "lib/systemd/system", u), "utf8");
    const gw = unit("ce-gateway.service");
    expect(gw).toMatch(/^User=ce$/m);
    expect(gw).toMatch(/^NoNewPrivileges=yes$/m);
    expect(gw).toMatch(/^ProtectSystem=strict$/m);
    expect(gw).toMatch(/^ReadWritePaths=\/var\/lib\/ce$/m);
    expect(gw).toMatch(/^CapabilityBoundingSet=CAP_NET_BIND_SERVICE$/m);
    const jem = unit("ce-jem.service");
    // The set docs/security.md names for the JEM ("only `SETUID SETGID ...`"), word for word.
    const named = /and only\s+`([A-Z_ ]+)`/.exec(readFileSync(join(ROOT, "docs/security.md"), "utf8"))![1]!.split(" ");
    const bounding = /^CapabilityBoundingSet=(.*)$/m.exec(jem)![1]!.split(" ");
    expect(bounding.map((c) => c.replace(/^CAP_/, "")).sort()).toEqual(named.sort());
    expect(jem).toMatch(/^User=root$/m);
    expect(jem).toMatch(/^Group=ce$/m);
    expect(jem).toMatch(/^KillMode=process$/m);
  });

  it("Redis: the settings ./ce start uses, and the postinst's ACL rules are redisAclRules()", async () => {
    const conf = readFileSync(join(tree, "etc/redis/redis-ce.conf"), "utf8");
    for (const line of [
      "bind 127.0.0.1 -::1",
      "protected-mode yes",
      "aclfile /etc/redis/ce-users.acl",
      "appendonly yes",
      "maxmemory-policy noeviction",
      "hash-max-listpack-value 512",
      "hash-max-listpack-entries 128",
    ])
      expect(conf.split("\n"), line).toContain(line);
    const port = /^port (\d+)$/m.exec(conf)![1];
    expect(readFileSync(join(tree, "etc/ce/ce.yaml"), "utf8")).toContain(`url: redis://127.0.0.1:${port}`);
    const postinst = readFileSync(join(await control(), "postinst"), "utf8");
    expect(/^ACL_RULES='(.*)'$/m.exec(postinst)![1]).toBe(redisAclRules("{ce}*"));
  });

  it("the bundles run from the unpacked tree alone; the shipped ce.yaml is valid and refused until endpoint and certificates are set", async () => {
    // Outside the workspace: nothing to resolve a module from but the bundle itself.
    const env = { PATH: process.env.PATH, CE_CONFIG: join(tree, "etc/ce/ce.yaml"), CE_STARTUP_CHECKS: "" };
    const doctor = await exec(process.execPath, [join(tree, "usr/lib/ce-rest/ceadm/main.js"), "doctor"], { env, cwd: out });
    expect(doctor.code).toBe(1);
    expect(doctor.stdout).toMatch(/FATAL {3}config: endpoint\.url https:\/\/ce\.example\.org:443\/arex is still the placeholder/);
    expect(doctor.stdout).toMatch(/FATAL {3}config: gateway\.tls\.certFile and gateway\.tls\.keyFile are not both set/);
    // The configuration itself is valid: only the doctor's checks refuse it.
    expect(doctor.stderr).toBe("");
    for (const app of ["jem", "gateway"]) {
      const r = await exec(process.execPath, [join(tree, `usr/lib/ce-rest/${app}/main.js`)], { env, cwd: out });
      expect(r.code, app).toBe(1);
      expect(r.stderr, app).toMatch(
        new RegExp(`^${app}: cannot start: config: endpoint\\.url https://ce\\.example\\.org:443/arex is still the placeholder`),
      );
    }
  }, 120_000);
});
