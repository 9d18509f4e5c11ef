/**
 * Validates deploy/ without a Docker engine (run through deploy/validate.sh):
 *  1. compose.yaml: structure (compose-check.ts), after variable interpolation with defaults;
 *  2. every build's Dockerfile exists; its COPY sources exist; its pnpm filters name workspace
 *     packages; its CMD is the non-Docker start command of the app (package.json `start`);
 *  3. every CE service's config (the mounted ce.yaml + its CE__* environment) passes the schema,
 *     the paths it names are mounted, and the healthcheck/published ports match the config;
 *  4. unless --no-install: the Dockerfile's install is replayed in a scratch copy of the build
 *     context (offline, from the local pnpm store) and its CMD's config check runs there.
 */
import { spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { basename, join, posix, relative, resolve } from "node:path";
import { checkCompose, interpolate, type VolumeMount } from "./compose-check.ts";

const root = resolve(import.meta.dirname, "..");
const deployDir = import.meta.dirname;
// `yaml` is a dependency of @ce/config; resolve it from there (deploy/ is not a workspace package).
const YAML = createRequire(join(root, "packages/config/package.json"))("yaml") as typeof import("yaml");
const { loadConfig, redisAclRules } = (await import(
  join(root, "packages/config/src/index.ts")
)) as typeof import("../packages/config/src/index.ts");

const errors: string[] = [];
const warnings: string[] = [];
// A report on stdout is this script's output, not logging.
const print = (line: string) => process.stdout.write(`${line}\n`);
const ok = (msg: string) => print(`ok    ${msg}`);
const fail = (msg: string) => errors.push(msg);
const install = !process.argv.includes("--no-install");

// --- 1. compose structure ---------------------------------------------------------------------
const composeFile = join(deployDir, "compose.yaml");
const interpErrors: string[] = [];
const compose = interpolate(YAML.parse(readFileSync(composeFile, "utf8"), { merge: true }), { ...process.env }, interpErrors) as {
  services: Record<string, Record<string, unknown>>;
};
interpErrors.forEach((e) => fail(`compose.yaml: ${e}`));
const report = checkCompose(compose);
report.errors.forEach((e) => fail(`compose.yaml ${e}`));
if (report.errors.length === 0) ok(`compose.yaml structure (${Object.keys(compose.services).length} services)`);

interface Instr {
  op: string;
  args: string;
}
function parseDockerfile(text: string): Instr[] {
  const lines = text.replace(/\\\r?\n/g, " ").split(/\r?\n/);
  return lines
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith("#"))
    .map((l) => {
      const [op, ...rest] = l.split(/\s+/);
      return { op: op!.toUpperCase(), args: rest.join(" ") };
    });
}

const workspace = new Map<string, string>(); // package name → dir
for (const dir of ["", ...["apps", "packages", "tests"].flatMap((d) => safeList(join(root, d)).map((x) => `${d}/${x}`))]) {
  const pj = join(root, dir, "package.json");
  if (existsSync(pj)) workspace.set((JSON.parse(readFileSync(pj, "utf8")) as { name: string }).name, dir);
}
function safeList(dir: string): string[] {
  try {
    return spawnSync("ls", [dir], { encoding: "utf8" }).stdout.split("\n").filter(Boolean);
  } catch {
    return [];
  }
}

// --- 2-4. per built service -------------------------------------------------------------------
const checkedImages = new Set<string>();
const ceServices: { name: string; role: "gateway" | "jem"; config: ReturnType<typeof loadConfig> }[] = [];
for (const [name, svc] of Object.entries(compose.services)) {
  const build = svc.build as { context?: string; dockerfile?: string } | string | undefined;
  if (!build) continue;
  const context = resolve(deployDir, typeof build === "string" ? build : (build.context ?? "."));
  const dockerfile = resolve(context, typeof build === "string" ? "Dockerfile" : (build.dockerfile ?? "Dockerfile"));
  const where = `${name} (${relative(root, dockerfile)})`;
  if (!existsSync(dockerfile)) {
    fail(`${where}: Dockerfile not found`);
    continue;
  }
  const instrs = parseDockerfile(readFileSync(dockerfile, "utf8"));
  const role = basename(dockerfile).startsWith("jem") ? "jem" : "gateway";

  const from = instrs.find((i) => i.op === "FROM")?.args ?? "";
  if (!/^node:20-bookworm-slim\b/.test(from)) fail(`${where}: FROM ${from}, expected node:20-bookworm-slim`);
  if (!instrs.some((i) => i.op === "RUN" && /corepack enable/.test(i.args))) fail(`${where}: pnpm is not enabled through corepack`);
  // `COPY --from=<stage>` copies between stages of a multi-stage build, not from the context.
  const copies = instrs
    .filter((i) => i.op === "COPY" && !/--from=/.test(i.args))
    .map((i) => i.args.split(/\s+/).filter((a) => !a.startsWith("--")));
  for (const c of copies)
    for (const src of c.slice(0, -1)) if (!existsSync(join(context, src))) fail(`${where}: COPY source ${src} missing`);
  const installRun = instrs.find((i) => i.op === "RUN" && /pnpm install/.test(i.args));
  const filters = [...(installRun?.args ?? "").matchAll(/--filter\s+"?([^"\s]+)"?/g)].map((m) => m[1]!.replace(/\.\.\.$/, ""));
  if (!installRun || !/--frozen-lockfile/.test(installRun.args)) fail(`${where}: no pnpm install --frozen-lockfile`);
  for (const f of filters) if (!workspace.has(f)) fail(`${where}: --filter ${f} is not a workspace package`);

  // The container runs the same command as `pnpm --filter <app> start`, only from the repo root.
  const cmdInstr = instrs.filter((i) => i.op === "CMD").at(-1);
  let cmd: string[] = [];
  try {
    cmd = JSON.parse(cmdInstr?.args ?? "") as string[];
  } catch {
    fail(`${where}: CMD must be in exec form (JSON array)`);
  }
  const appDir = workspace.get(`@ce/${role}`)!;
  const start =
    (JSON.parse(readFileSync(join(root, appDir, "package.json"), "utf8")) as { scripts?: { start?: string } }).scripts?.start ?? "";
  const expected = start.split(/\s+/).map((a) => (a.endsWith(".ts") || a.endsWith(".js") ? posix.join(appDir, a) : a));
  if (JSON.stringify(cmd) !== JSON.stringify(expected))
    fail(`${where}: CMD ${JSON.stringify(cmd)} differs from the start script ${JSON.stringify(expected)}`);
  const entry = cmd.find((a) => a.endsWith(".ts") || a.endsWith(".js"));
  const entryReady = entry !== undefined && existsSync(join(root, entry));
  if (!entryReady) warnings.push(`${where}: entry ${entry} does not exist yet (CMD not runnable)`);

  // Config as the container sees it: the mounted file plus the service's CE__* environment.
  const env = normaliseEnv(svc.environment);
  const mounts = report.mounts.filter((m) => m.service === name);
  const cfgMount = mounts.find((m) => m.target === env.CE_CONFIG);
  if (!cfgMount) {
    fail(`${where}: CE_CONFIG=${env.CE_CONFIG} is not a mounted file`);
    continue;
  }
  const cfgFile = resolve(deployDir, cfgMount.source);
  const ceEnv = Object.fromEntries(Object.entries(env).filter(([k]) => k.startsWith("CE__")));
  let config: ReturnType<typeof loadConfig>;
  try {
    config = loadConfig({ file: cfgFile, env: ceEnv });
  } catch (e) {
    fail(`${where}: config ${relative(root, cfgFile)} with ${Object.keys(ceEnv).join(",")}: ${(e as Error).message}`);
    continue;
  }
  ok(`${name}: ${relative(root, cfgFile)} + ${Object.keys(ceEnv).length} CE__ overrides pass the config schema`);
  ceServices.push({ name, role, config });
  checkMounted(where, mounts, svc, role, config);
  const adminPort = role === "jem" ? config.admin.jemPort : config.admin.port;
  const hc = JSON.stringify((svc.healthcheck as { test?: unknown } | undefined)?.test ?? "");
  if (!hc.includes(`127.0.0.1:${adminPort}/healthz`)) fail(`${where}: healthcheck does not hit 127.0.0.1:${adminPort}/healthz`);
  const published = ((svc.ports as string[] | undefined) ?? []).map((p) => String(p).split(":").at(-1)!.split("/")[0]);
  for (const port of role === "gateway" ? [config.gateway.port, adminPort] : [adminPort]) {
    if (!published.includes(String(port))) fail(`${where}: container port ${port} is not published`);
  }

  if (install && !checkedImages.has(dockerfile)) {
    checkedImages.add(dockerfile);
    replay(where, context, instrs, cmd, entryReady ? entry : undefined, cfgFile, ceEnv);
  }
}

function normaliseEnv(e: unknown): Record<string, string> {
  if (Array.isArray(e)) return Object.fromEntries(e.map((x) => String(x).split(/=(.*)/s).slice(0, 2) as [string, string]));
  return Object.fromEntries(Object.entries((e as Record<string, unknown>) ?? {}).map(([k, v]) => [k, v == null ? "" : String(v)]));
}

/** Every path the config names must be inside a mount (or a declared secret) of the service. */
function checkMounted(where: string, mounts: VolumeMount[], svc: Record<string, unknown>, role: string, c: ReturnType<typeof loadConfig>) {
  const secrets = ((svc.secrets as unknown[] | undefined) ?? []).map(
    (s) =>
      `/run/secrets/${typeof s === "string" ? s : ((s as { target?: string; source: string }).target ?? (s as { source: string }).source)}`,
  );
  const paths: [string, string | undefined][] = [
    ["paths.controlDir", c.paths.controlDir],
    ["paths.sessionRoot", c.paths.sessionRoot],
    ["auth.caDir", c.auth.caDir],
    ["admin.tokenFile", c.admin.tokenFile],
    ["delegations.encryptionKeyFile", c.delegations.encryptionKeyFile],
    [`redis.users.${role}.passwordFile`, c.redis.users[role as "gateway" | "jem"].passwordFile],
  ];
  if (role === "gateway") paths.push(["gateway.tls.certFile", c.gateway.tls.certFile], ["gateway.tls.keyFile", c.gateway.tls.keyFile]);
  if (role === "jem") paths.push(["paths.rteDir", c.paths.rteDir]);
  for (const [key, p] of paths) {
    if (!p) continue;
    const inside = (t: string) => p === t || p.startsWith(`${t.replace(/\/$/, "")}/`);
    if (!mounts.some((m) => inside(m.target)) && !secrets.some(inside)) fail(`${where}: ${key}=${p} is not on a mounted volume or secret`);
  }
  const session = mounts.find((m) => m.target === c.paths.sessionRoot);
  if (session && session.source !== session.target)
    fail(`${where}: the session root must be mounted at the same path as on the host (worker nodes see host paths)`);
  // Batch jobs write comment/diag/lrms_done into the control dir on the worker nodes.
  const control = mounts.find((m) => m.target === c.paths.controlDir);
  if (!control || control.source !== control.target || !control.source.startsWith("/"))
    fail(`${where}: the control directory must be a host path mounted at the same path (worker nodes reach it), not a named volume`);
  if (role === "jem" && c.mapping) checkPrivileged(where, svc);
}

/** The JEM runs jobs as mapped accounts: root with exactly the capabilities of the privileged component. */
function checkPrivileged(where: string, svc: Record<string, unknown>) {
  const need = ["SETUID", "SETGID", "CHOWN", "FOWNER", "DAC_OVERRIDE"];
  const add = ((svc.cap_add as string[] | undefined) ?? []).map(String);
  const drop = ((svc.cap_drop as string[] | undefined) ?? []).map(String);
  if (!String(svc.user ?? "").startsWith("0:"))
    fail(`${where}: with mapping on the JEM runs as uid 0 (user "0:<CE group>") to switch to mapped accounts`);
  if (!drop.includes("ALL")) fail(`${where}: cap_drop must be [ALL] (the JEM gets only what the privileged component needs)`);
  for (const cap of need) if (!add.includes(cap)) fail(`${where}: cap_add lacks ${cap} (needed by the privileged component)`);
  for (const cap of add) if (!need.includes(cap)) fail(`${where}: cap_add ${cap} is more than the privileged component needs`);
  ok(`${where}: runs as root with only ${need.join(", ")} (jobs run as their mapped accounts)`);
}

/** Replays COPY + `pnpm install` of the Dockerfile in a scratch dir, then the CMD's config check. */
function replay(
  where: string,
  context: string,
  instrs: Instr[],
  cmd: string[],
  entry: string | undefined,
  cfgFile: string,
  ceEnv: Record<string, string>,
) {
  const dir = mkdtempSync(join(tmpdir(), "ce-image-"));
  try {
    const skip = (src: string) => !/(^|\/)(node_modules|dist|\.git|\.ce)(\/|$)/.test(relative(context, src));
    for (const i of instrs) {
      if (i.op === "COPY" && /--from=/.test(i.args)) {
        continue; // one scratch dir stands for every stage: the files are already there
      } else if (i.op === "COPY") {
        const parts = i.args.split(/\s+/).filter((a) => !a.startsWith("--"));
        const dest = parts.at(-1)!;
        for (const src of parts.slice(0, -1)) {
          const target = dest.endsWith("/") ? join(dir, dest, basename(src)) : join(dir, dest);
          cpSync(join(context, src), target, { recursive: true, filter: skip });
        }
      } else if (i.op === "RUN" && (/pnpm install/.test(i.args) || /scripts\/build-app\.ts/.test(i.args))) {
        const line = i.args.replace(/--mount=\S+/g, "").trim();
        const r = spawnSync("bash", ["-c", line], { cwd: dir, encoding: "utf8", env: { ...process.env, CI: "true" } });
        if (r.status !== 0) return fail(`${where}: replayed "${line}" failed:\n${r.stderr || r.stdout}`);
        ok(`${where}: replayed ${line.replace(/\s+/g, " ")}`);
      }
    }
    const supportsCheck = entry !== undefined && readFileSync(join(dir, entry), "utf8").includes("--check-config");
    // Without --check-config in the app, run the config load the app does at start, with the same runtime (tsx).
    const argv = supportsCheck
      ? [...cmd.slice(1), "--check-config"]
      : ["--import", "tsx", "--input-type=module", "-e", 'const m = await import("./packages/config/src/index.ts"); m.loadConfig();'];
    const r = spawnSync(cmd[0] ?? "node", argv, {
      cwd: dir,
      encoding: "utf8",
      env: { PATH: process.env.PATH, CE_CONFIG: cfgFile, ...ceEnv },
      timeout: 60_000,
    });
    if (r.status !== 0)
      return fail(`${where}: ${supportsCheck ? "CMD --check-config" : "config load with tsx"} failed in the image layout:\n${r.stderr}`);
    ok(`${where}: ${supportsCheck ? `${cmd.join(" ")} --check-config` : "loadConfig() under tsx"} succeeds in the image layout`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

// --- 4b. Redis requires the CE's ACL users ----------------------------------------------------
checkRedisAcl();
function checkRedisAcl() {
  const redis = compose.services.redis;
  if (!redis) return fail("compose.yaml: no redis service");
  const cmd = (redis.command as string[] | undefined) ?? [];
  if (!cmd.includes("--aclfile")) fail("redis: redis-server runs without --aclfile (anyone reaching it gets every key)");
  if (redis.ports) fail("redis: its port must not be published");
  const env = normaliseEnv(redis.environment);
  const users = new Map(
    (env.REDIS_ACL_USERS ?? "")
      .split(/\s+/)
      .filter(Boolean)
      .map((e) => [e.split(":")[0]!, e.slice(e.indexOf(":") + 1)]),
  );
  const redisSecrets = ((redis.secrets as unknown[] | undefined) ?? []).map(String);
  for (const { name, role, config } of ceServices) {
    const u = config.redis.users[role];
    if (!u.passwordFile) {
      fail(`${name}: redis.users.${role}.passwordFile is not set (the Redis ACL has no anonymous access)`);
      continue;
    }
    // Same secret on both sides: the app's /run/secrets/<name> is the file the aclfile is built from.
    if (users.get(u.username) !== u.passwordFile)
      fail(`${name}: Redis user ${u.username} with ${u.passwordFile} is not in the redis service's REDIS_ACL_USERS`);
    const secret = u.passwordFile.replace(/^\/run\/secrets\//, "");
    if (!redisSecrets.includes(secret)) fail(`redis: secret ${secret} (password of ${u.username}) is not given to the redis service`);
    const rules = redisAclRules(`${config.redis.prefix}*`);
    if (env.REDIS_ACL_RULES !== rules && !errors.some((e) => e.startsWith("redis: REDIS_ACL_RULES")))
      fail(
        `redis: REDIS_ACL_RULES ${JSON.stringify(env.REDIS_ACL_RULES)} differ from the CE's rules for prefix ${config.redis.prefix}: ${JSON.stringify(rules)}`,
      );
    if (new URL(config.redis.url).password) fail(`${name}: redis.url carries a password; use redis.users.${role}.passwordFile`);
  }
  const script = join(deployDir, "redis/start.sh");
  if (!existsSync(script) || !readFileSync(script, "utf8").includes("user default off"))
    fail("redis: deploy/redis/start.sh is missing or leaves the default user on");
  if (errors.length === 0) ok(`redis: ACL users ${[...users.keys()].join(", ")} from secrets, default user off, rules match the CE prefix`);
}

// --- 5. secrets the site must create ---------------------------------------------------------
for (const [n, s] of Object.entries((compose as { secrets?: Record<string, { file?: string }> }).secrets ?? {})) {
  if (s.file && !existsSync(resolve(deployDir, s.file)))
    warnings.push(`secret ${n}: ${s.file} does not exist (the site creates it, deploy/README.md "Quick start")`);
}

for (const w of warnings) print(`warn  ${w}`);
for (const e of errors) print(`FAIL  ${e}`);
print(errors.length ? `deploy: ${errors.length} problem(s)` : `deploy: valid (${warnings.length} warning(s))`);
process.exit(errors.length ? 1 : 0);
