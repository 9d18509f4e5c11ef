import { type ChildProcess, execFile, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chownSync, copyFileSync, existsSync, mkdirSync, readFileSync, readdirSync, readlinkSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { waitFor } from "@ce/testing";
import { createCA, createProxy, issueHostCert, issueUserCert, writeCADir } from "@ce/x509/testing";
import { freshRoot, HAS_SITE_TOOLS } from "./deb-site-root.js";
import { buildDeb } from "./package-deb.js";

const run = promisify(execFile);

/**
 * The Debian package as a site meets it (opt-in: CE_TEST_DEB_SITE=1; several minutes, so CI runs
 * the fast package-deb.test.ts instead). In a fresh Debian 12 root made by mmdebstrap (cached by
 * its recipe: deb-site-root.ts): Node.js 20 installed as the README says (NodeSource's nodejs
 * package holding this machine's binary, since NodeSource is not reachable from here), then the
 * package; the site's edits of /etc/ce/ce.yaml; `ceadm doctor` clean; the units' ExecStart lines
 * run as the units' users with their capabilities (setpriv standing in for systemd, which does
 * not run in a chroot) in a network namespace of their own (the package's fixed ports collide
 * with nothing); a real ARC client round trip; an upgrade to a rebuilt package (N+1) while the job
 * runs, the services restarted in the order of docs/operations.md "Upgrades"; the job finishes
 * once; `dpkg --purge` removes the package.
 */
const SITE = process.env.CE_TEST_DEB_SITE === "1" && HAS_SITE_TOOLS;

/**
 * A nodejs package as NodeSource's provides it (`nodejs`, /usr/bin/node), holding this machine's
 * Node.js 20 binary: NodeSource's repository is not reachable from the test machines, and
 * dpkg-repack cannot rebuild the installed one once npm has updated itself in place.
 */
async function nodeDeb(out: string): Promise<string> {
  const stage = join(out, "nodejs-stage");
  mkdirSync(join(stage, "usr/bin"), { recursive: true });
  mkdirSync(join(stage, "DEBIAN"), { recursive: true });
  copyFileSync(process.execPath, join(stage, "usr/bin/node"));
  const arch = (await run("dpkg", ["--print-architecture"])).stdout.trim();
  writeFileSync(
    join(stage, "DEBIAN/control"),
    `Package: nodejs\nVersion: ${process.versions.node}-1nodesource1+ce\nArchitecture: ${arch}\nMaintainer: test <test@localhost>\nDepends: libc6, libstdc++6\nDescription: Node.js ${process.versions.node} (this machine's binary)\n`,
  );
  const deb = join(out, `nodejs_${process.versions.node}_${arch}.deb`);
  await run("dpkg-deb", ["--root-owner-group", "-Zgzip", "--build", stage, deb]);
  return deb;
}

describe.skipIf(!SITE)("the Debian package installed, used, upgraded and purged as a site does", () => {
  // Made in beforeAll: a skipped suite still runs this body to collect its tests.
  const work = join(tmpdir(), `ce-deb-site-${randomBytes(4).toString("hex")}`);
  const root = join(work, "root");
  const client = join(work, "client");
  const ns = `ce-site-${randomBytes(3).toString("hex")}`;
  const mounts: string[] = [];
  const procs = new Map<string, ChildProcess>();
  const logs = new Map<string, string>();
  let debs: { n: string; n1: string; node: string };
  let jobId = "";

  const chroot = (args: string[], opts: { timeout?: number; env?: NodeJS.ProcessEnv } = {}) =>
    run("chroot", [root, ...args], {
      timeout: opts.timeout ?? 300_000,
      maxBuffer: 64 * 1024 * 1024,
      env: { PATH: "/usr/sbin:/usr/bin:/sbin:/bin", DEBIAN_FRONTEND: "noninteractive", LANG: "C.UTF-8", ...opts.env },
    });
  const inNs = (file: string, args: string[], env: NodeJS.ProcessEnv = process.env, cwd?: string) =>
    run("ip", ["netns", "exec", ns, file, ...args], { env, cwd, timeout: 120_000, maxBuffer: 16 * 1024 * 1024 });

  /** A unit's settings as systemd reads them (last value wins; `%i` is the instance). */
  const unit = (name: string, instance = "") => {
    const text = readFileSync(join(root, "lib/systemd/system", name), "utf8");
    const get = (k: string) =>
      [...text.matchAll(new RegExp(`^${k}=(.*)$`, "gm"))].map((m) => m[1]!.replaceAll("%i", instance)).at(-1) ?? "";
    return {
      exec: get("ExecStart").split(/\s+/),
      user: get("User") || "root",
      group: get("Group"),
      env: get("Environment").split(/\s+/).filter(Boolean),
      ambient: get("AmbientCapabilities").split(/\s+/).filter(Boolean),
      bounding: get("CapabilityBoundingSet").split(/\s+/).filter(Boolean),
      runtimeDir: get("RuntimeDirectory"),
    };
  };
  const capList = (caps: string[]) => caps.map((c) => `+${c.replace(/^CAP_/, "").toLowerCase()}`).join(",");

  /** Starts a unit's ExecStart as its User/Group with its capabilities, as systemd would, in the namespace. */
  const start = (name: string, instance = "") => {
    const u = unit(name, instance);
    if (u.runtimeDir) {
      mkdirSync(join(root, "run", u.runtimeDir), { recursive: true });
      const [uid, gid] = idsOf(u.user);
      chownSync(join(root, "run", u.runtimeDir), uid, gid);
    }
    const setpriv = ["setpriv", "--reuid", u.user, "--regid", u.group || u.user, "--init-groups"];
    if (u.ambient.length > 0) setpriv.push("--inh-caps", capList(u.ambient), "--ambient-caps", capList(u.ambient));
    if (u.bounding.length > 0) setpriv.push("--bounding-set", `-all,${capList(u.bounding)}`);
    // `--supervised systemd` wants a notify socket only systemd has: the rest of the line as it is.
    const exec = u.exec.map((a) => (a === "systemd" && u.exec.includes("--supervised") ? "no" : a));
    const args = [
      "netns",
      "exec",
      ns,
      "chroot",
      root,
      ...setpriv,
      "/usr/bin/env",
      "-i",
      "PATH=/usr/sbin:/usr/bin:/sbin:/bin",
      ...u.env,
      ...exec,
    ];
    const p = spawn("ip", args, { stdio: ["ignore", "pipe", "pipe"] });
    let log = "";
    p.stdout!.on("data", (d) => (log += String(d)));
    p.stderr!.on("data", (d) => (log += String(d)));
    p.on("exit", () => logs.set(`${name} ${p.pid}`, log));
    procs.set(name, p);
    return { p, log: () => log };
  };
  const stop = async (name: string) => {
    const p = procs.get(name);
    if (!p || p.exitCode !== null) return;
    const done = new Promise((r) => p.once("exit", r));
    p.kill("SIGTERM");
    await Promise.race([done, new Promise((r) => setTimeout(r, 30_000))]);
    if (p.exitCode === null) p.kill("SIGKILL");
    procs.delete(name);
  };
  const idsOf = (account: string): [number, number] => {
    const line = readFileSync(join(root, "etc/passwd"), "utf8")
      .split("\n")
      .find((l) => l.startsWith(`${account}:`))!;
    const f = line.split(":");
    return [Number(f[2]), Number(f[3])];
  };
  const arcEnv = () => ({
    ...process.env,
    HOME: join(client, "home"),
    X509_USER_PROXY: join(client, "proxy.pem"),
    X509_CERT_DIR: join(client, "ca"),
  });

  beforeAll(async () => {
    mkdirSync(work, { mode: 0o700 });
    // The packages first (N and N+1 are two builds of this tree), and nodejs as this machine has it.
    // CE_TEST_DEB_SITE_DEBS: a directory to keep the two builds in and reuse (iterating on the test).
    const out = process.env.CE_TEST_DEB_SITE_DEBS ?? join(work, "debs");
    const arch = (await run("dpkg", ["--print-architecture"])).stdout.trim();
    const build = async (version: string) => {
      const deb = join(out, `ce-rest_${version}_${arch}.deb`);
      return process.env.CE_TEST_DEB_SITE_DEBS && existsSync(deb) ? deb : buildDeb({ outDir: out, version });
    };
    const n = await build("1.0.0");
    const n1 = await build("1.0.1");
    debs = { n, n1, node: await nodeDeb(out) };
    await freshRoot(root);
    for (const [src, dst, type] of [
      ["proc", "proc", "proc"],
      ["/dev", "dev", "bind"],
      ["/dev/pts", "dev/pts", "bind"],
    ] as const) {
      await run("mount", type === "bind" ? ["--bind", src, join(root, dst)] : ["-t", type, src, join(root, dst)]);
      mounts.push(join(root, dst));
    }
    // No service starts by itself in the root: the test starts them.
    writeFileSync(join(root, "usr/sbin/policy-rc.d"), "#!/bin/sh\nexit 101\n", { mode: 0o755 });
    await run("ip", ["netns", "add", ns]);
    await run("ip", ["-n", ns, "link", "set", "lo", "up"]);
  }, 1_800_000);

  afterAll(async () => {
    for (const name of [...procs.keys()].reverse()) await stop(name);
    // Jobs and anything else still running inside the root (the fork back end's jobs): ours.
    for (const pid of readdirSync("/proc").filter((p) => /^\d+$/.test(p))) {
      try {
        if (readlinkSync(`/proc/${pid}/root`) === root) process.kill(Number(pid), "SIGKILL");
      } catch {
        // gone, or not ours to read
      }
    }
    for (const m of mounts.reverse()) await run("umount", ["-l", m]).catch(() => undefined);
    await run("ip", ["netns", "del", ns]).catch(() => undefined);
    // Never remove a tree that still has a mount in it (the host's /dev).
    const mounted = readFileSync("/proc/mounts", "utf8").includes(` ${root}/`);
    if (!mounted) rmSync(work, { recursive: true, force: true });
    if (process.env.CE_TEST_DEB_SITE_LOGS) for (const [k, v] of logs) console.log(`--- ${k}\n${v}`);
  }, 300_000);

  it("Node.js 20 as the README says, then the package: account, secrets, Redis ACL file", async () => {
    copyFileSync(debs.node, join(root, "tmp/nodejs.deb"));
    copyFileSync(debs.n, join(root, "tmp/ce-rest.deb"));
    await chroot(["apt-get", "install", "-y", "-q", "/tmp/nodejs.deb", "/tmp/ce-rest.deb"]);
    expect((await chroot(["dpkg-query", "-W", "-f", "${Version} ${Status}", "ce-rest"])).stdout).toBe("1.0.0 install ok installed");
    expect((await chroot(["node", "--version"])).stdout).toMatch(/^v20\./);
    expect((await chroot(["getent", "passwd", "ce"])).stdout).toMatch(
      /^ce:x:\d+:\d+:CE REST services:\/var\/lib\/ce:\/usr\/sbin\/nologin$/m,
    );
    for (const s of ["redis-gateway", "redis-jem", "admin-token", "delegation-key"])
      expect((await chroot(["stat", "-c", "%U %a", `/etc/ce/secrets/${s}`])).stdout.trim(), s).toBe("ce 600");
    expect(readFileSync(join(root, "etc/redis/ce-users.acl"), "utf8")).toMatch(
      /^user default off .*\nuser gateway on #[0-9a-f]{64} .*\nuser jem on #[0-9a-f]{64} /,
    );
    expect((await chroot(["ceadm", "--help"])).stdout).toContain("doctor");
  }, 600_000);

  it("configured as a site does, ceadm doctor finds nothing once Redis runs", async () => {
    const ca = createCA({ dn: "/DC=org/DC=site-test/CN=Site Test CA" });
    const host = issueHostCert(ca, { hostnames: ["localhost"] });
    const user = issueUserCert(ca, { dn: "/DC=org/DC=site-test/CN=Site User" });
    writeCADir(join(root, "etc/grid-security/certificates"), [ca]);
    writeFileSync(join(root, "etc/grid-security/hostcert.pem"), host.certPem);
    writeFileSync(join(root, "etc/grid-security/hostkey.pem"), host.keyPem, { mode: 0o640 });
    chownSync(join(root, "etc/grid-security/hostkey.pem"), 0, idsOf("ce")[1]);
    mkdirSync(join(client, "home"), { recursive: true });
    writeCADir(join(client, "ca"), [ca]);
    writeFileSync(join(client, "proxy.pem"), createProxy(user.cert, user.key).filePem, { mode: 0o600 });
    await chroot(["useradd", "-M", "-U", "-s", "/usr/sbin/nologin", "cejob"]);
    // The site's edits of the conffile: the endpoint, the certificate, the mapping.
    const file = join(root, "etc/ce/ce.yaml");
    const conf = readFileSync(file, "utf8")
      .replace("url: https://ce.example.org:443/arex", "url: https://localhost:443/arex")
      .replace(/  # tls:\n  #   certFile: (\S+)\n  #   keyFile: (\S+)\n/, "  tls:\n    certFile: $1\n    keyFile: $2\n")
      .replace("  backend: fork\n", '  backend: fork\n  fork: { cgroup: "off" }\n')
      .concat('mapping:\n  rules:\n    - { name: everyone, match: "*", user: cejob }\n');
    writeFileSync(file, conf);
    const before = await inNs("chroot", [root, "ceadm", "doctor"]).catch((e: { code: number; stdout: string }) => e);
    expect(before.stdout).toMatch(/WARNING redis: cannot reach Redis \(redis:\/\/127\.0\.0\.1:6390\)/);
    expect(before.stdout).not.toMatch(/FATAL/);
    const redis = start("redis-server@.service", "ce");
    await waitFor("redis-server@ce", () => (/Ready to accept connections/.test(redis.log()) ? true : undefined), 30_000);
    const after = await inNs("chroot", [root, "ceadm", "doctor"]).catch((e: { code: number; stdout: string }) => e);
    expect(after.stdout).toBe("doctor: no problems found\n");
  }, 300_000);

  const up = async () => {
    start("ce-jem.service");
    const gw = start("ce-gateway.service");
    await waitFor(
      "the gateway on https://localhost:443",
      async () => {
        if (procs.get("ce-gateway.service")?.exitCode !== null) throw new Error(`the gateway exited: ${gw.log()}`);
        const r = await inNs("curl", ["-sk", "-o", "/dev/null", "-w", "%{http_code}", "https://localhost:443/arex/rest"]).catch(
          () => undefined,
        );
        return r && r.stdout !== "000" ? true : undefined;
      },
      120_000,
      { everyMs: 2_000 },
    );
  };

  it("the units' commands start as their users: the gateway as ce on port 443, the JEM as root in group ce", async () => {
    await up();
    const ids = (name: string) => readFileSync(`/proc/${procs.get(name)!.pid}/status`, "utf8");
    expect(ids("ce-gateway.service")).toMatch(new RegExp(`^Uid:\\s+${idsOf("ce")[0]}\\s`, "m"));
    expect(ids("ce-gateway.service")).toMatch(/^CapEff:\s+0000000000000400$/m); // cap_net_bind_service only
    expect(ids("ce-jem.service")).toMatch(/^Uid:\s+0\s/m);
    expect(ids("ce-jem.service")).toMatch(new RegExp(`^Gid:\\s+${idsOf("ce")[1]}\\s`, "m"));
  }, 300_000);

  it("an ARC client submits a job; while it runs, N+1 is installed and the services restart JEM first; the job finishes once and arcget fetches it", async () => {
    writeFileSync(
      join(client, "job.xrsl"),
      `&(executable="/bin/sh")(arguments="-c" "echo started >> /var/tmp/site-job-runs; sleep 40; echo done")(stdout="out.txt")(outputfiles=("out.txt" ""))(jobname="site")`,
    );
    const sub = await inNs("arcsub", ["-C", "https://localhost:443/arex", "-T", "arcrest", "job.xrsl"], arcEnv(), client);
    jobId = /Job submitted with jobid: (\S+)/.exec(sub.stdout)![1]!;
    const runs = join(root, "var/tmp/site-job-runs");
    await waitFor("the job to start", () => (existsSync(runs) ? true : undefined), 120_000, { everyMs: 500 });

    copyFileSync(debs.n1, join(root, "tmp/ce-rest.deb"));
    await chroot(["apt-get", "install", "-y", "-q", "/tmp/ce-rest.deb"]);
    expect((await chroot(["dpkg-query", "-W", "-f", "${Version}", "ce-rest"])).stdout).toBe("1.0.1");
    expect(readFileSync(join(root, "etc/ce/ce.yaml"), "utf8")).toContain("url: https://localhost:443/arex"); // the site's conffile kept
    // docs/operations.md "Upgrades" (what the postinst's try-restart does under systemd): JEM, then gateway.
    await stop("ce-jem.service");
    await stop("ce-gateway.service");
    await up();

    const stat = await waitFor(
      "the job to end",
      async () => {
        const s = (await inNs("arcstat", [jobId], arcEnv(), client).catch((e: { stdout: string }) => e)).stdout;
        return /State: (Finished|Failed|Killed)/.test(s) ? s : undefined;
      },
      240_000,
      { everyMs: 2_000 },
    );
    expect(stat).toContain("State: Finished");
    const dl = join(client, "dl");
    mkdirSync(dl);
    const get = await inNs("arcget", [jobId], arcEnv(), dl);
    expect(get.stdout).toContain("successfully retrieved: 1");
    const dir = /Results stored at: (\S+)/.exec(get.stdout)![1]!;
    expect(readFileSync(join(dl, dir, "out.txt"), "utf8")).toBe("done\n");
    expect(readFileSync(runs, "utf8")).toBe("started\n");
  }, 900_000);

  it("dpkg --purge removes the package and what it made, keeping the site's data", async () => {
    await stop("ce-gateway.service");
    await stop("ce-jem.service");
    await stop("redis-server@.service");
    const purge = await chroot(["dpkg", "--purge", "ce-rest"]);
    expect((await chroot(["dpkg-query", "-W", "-f", "${Status}", "ce-rest"]).catch((e: { stdout: string }) => e)).stdout).not.toMatch(
      /installed/,
    );
    for (const gone of [
      "usr/lib/ce-rest",
      "usr/bin/ceadm",
      "etc/ce",
      "etc/redis/ce-users.acl",
      "etc/redis/redis-ce.conf",
      "var/lib/redis/ce",
      "var/lib/ce/control",
      "lib/systemd/system/ce-jem.service",
    ])
      expect(existsSync(join(root, gone)), gone).toBe(false);
    // What is left is the site's: sessions and accounting, said so.
    if (existsSync(join(root, "var/lib/ce"))) {
      expect(readdirSync(join(root, "var/lib/ce")).filter((d) => d !== "session" && d !== "accounting")).toEqual([]);
      expect(purge.stderr).toContain("kept the site's data in /var/lib/ce");
    }
  }, 300_000);
});
