import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { schemaKeys } from "./keys.js";
import { compileConfig, ConfigError, envOverrides, loadConfig } from "./load.js";
import { configSchema } from "./schema.js";

const dir = mkdtempSync(join(tmpdir(), "ce-config-"));

/** The ConfigError a compile throws (fails the test when it does not throw one). */
function refusal(input: unknown): ConfigError {
  try {
    compileConfig(input as Parameters<typeof compileConfig>[0], dir);
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    expect((e as ConfigError).code).toBe("CONFIG_INVALID");
    return e as ConfigError;
  }
  throw new Error("the configuration was accepted");
}

describe("defaults", () => {
  it("an empty file compiles to the embedded development setup", () => {
    const c = compileConfig({}, dir);
    expect(c.endpoint.url).toBe("https://localhost:8443/arex");
    expect(c.origin).toBe("https://localhost:8443");
    expect(c.mountPath).toBe("/arex");
    expect(c.redis).toMatchObject({ url: "redis://127.0.0.1:6379", prefix: "{ce}", embedded: false });
    expect(c.gateway).toMatchObject({ host: "127.0.0.1", port: 8443 });
    expect(c.jobs.queues.map((q) => q.name)).toEqual(["main"]);
    expect(c.jobs.defaultQueue).toBe("main");
    expect(c.logging.level).toBe("info");
  });

  it("the batch-system rate limit defaults per back end: fork none, slurm 100/s, others 20/s; an explicit value wins", () => {
    expect(compileConfig({}, dir).lrms.callsPerSecond).toBe(0);
    expect(compileConfig({ lrms: { backend: "slurm" } }, dir).lrms.callsPerSecond).toBe(100);
    expect(compileConfig({ lrms: { backend: "pbs" } }, dir).lrms.callsPerSecond).toBe(20);
    expect(compileConfig({ lrms: { backend: "slurm", callsPerSecond: 5 } }, dir).lrms.callsPerSecond).toBe(5);
    refusal({ lrms: { callsPerSecond: -1 } });
  });
});

describe("derived paths", () => {
  it("resolve against the base directory, each under stateDir unless set", () => {
    const c = compileConfig({ paths: { stateDir: "st" } }, dir);
    expect(c.paths).toMatchObject({
      stateDir: join(dir, "st"),
      controlDir: join(dir, "st/control"),
      sessionRoot: join(dir, "st/session"),
      rteDir: join(dir, "st/rte"),
    });
    expect(c.auth.caDir).toBe(join(dir, "st/pki/ca"));
    expect(c.auth.voms.dir).toBe(join(dir, "st/pki/vomsdir"));
  });

  it("keep absolute paths and resolve relative ones set explicitly", () => {
    const c = compileConfig(
      {
        paths: { stateDir: "/srv/ce", controlDir: "ctl", sessionRoot: "/data/sessions" },
        auth: { caDir: "/etc/grid-security/certificates" },
      },
      dir,
    );
    expect(c.paths).toMatchObject({
      stateDir: "/srv/ce",
      controlDir: join(dir, "ctl"),
      sessionRoot: "/data/sessions",
      rteDir: "/srv/ce/rte",
    });
    expect(c.auth.caDir).toBe("/etc/grid-security/certificates");
  });

  it("relative paths in a config file are relative to that file, not to the working directory", () => {
    const file = join(dir, "ce.yaml");
    writeFileSync(file, "paths:\n  stateDir: state\n");
    expect(loadConfig({ file, env: {} }).paths.controlDir).toBe(join(dir, "state/control"));
  });

  it("the VOMS host names default to the endpoint's host name", () => {
    expect(compileConfig({ endpoint: { url: "https://ce.example.org:443/arex" } }, dir).auth.voms.hostNames).toEqual(["ce.example.org"]);
  });
});

describe("environment overrides CE__SECTION__KEY", () => {
  it("map to camelCase paths and parse JSON-looking values", () => {
    expect(
      envOverrides({
        CE__GATEWAY__PORT: "9443",
        CE__JOBS__ALLOW_NEW: "false",
        CE__AUTH__ALLOW: '["vo:atlas"]',
        CE__LOGGING__LEVEL: "debug",
        OTHER: "x",
        CE_CONFIG: "x",
      }),
    ).toEqual({
      gateway: { port: 9443 },
      jobs: { allowNew: false },
      auth: { allow: ["vo:atlas"] },
      logging: { level: "debug" },
    });
  });

  it("win over the file, and only touch the keys they name", () => {
    const file = join(dir, "over.yaml");
    writeFileSync(file, "gateway:\n  port: 7000\n  host: 0.0.0.0\njobs:\n  maxTotal: 5\n");
    const c = loadConfig({ file, env: { CE__GATEWAY__PORT: "9443", CE__REDIS__URL: "redis://127.0.0.1:6390" } });
    expect(c.gateway).toMatchObject({ port: 9443, host: "0.0.0.0" });
    expect(c.jobs.maxTotal).toBe(5);
    expect(c.redis.url).toBe("redis://127.0.0.1:6390");
  });

  it("a value that only looks like JSON stays a string", () => {
    expect(envOverrides({ CE__ENDPOINT__ADMIN_DOMAIN: "{not json" }).endpoint).toEqual({ adminDomain: "{not json" });
  });
});

describe("invalid values name the key", () => {
  it.each([
    [{ gateway: { port: 70000 } }, /gateway\.port: /],
    [{ redis: { prefix: "ce" } }, /redis\.prefix: prefix must be a Redis hash tag such as \{ce\}/],
    [{ jobs: { maxTotal: 0 } }, /jobs\.maxTotal: /],
    [{ logging: { level: "loud" } }, /logging\.level: /],
    [{ jobs: { queues: [{ name: "a b" }] } }, /jobs\.queues\.0\.name: queue names are letters, digits, _ \. -/],
    [{ jobs: { queues: [] } }, /jobs\.queues: at least one queue is required/],
    [{ jobs: { defaultQueue: "nope" } }, /jobs\.defaultQueue: "nope" is not one of jobs\.queues/],
  ])("%j", (input, reason) => {
    const e = refusal(input);
    expect(e.message).toMatch(/^invalid configuration: /);
    expect(e.message).not.toContain("\n");
    expect(e.message).toMatch(reason);
  });

  it("an environment override with a bad value is refused like the file value", () => {
    expect(() => loadConfig({ env: { CE__GATEWAY__PORT: "-1" } })).toThrow(/gateway\.port: /);
  });

  it("a config file that does not parse names the file", () => {
    const file = join(dir, "broken.yaml");
    writeFileSync(file, "gateway: [\n");
    expect(() => loadConfig({ file, env: {} })).toThrow(new RegExp(`cannot parse ${file}`));
  });
});

describe("unknown keys stop the boot with one line naming the key, its source and the nearest key", () => {
  it("in the file: each unknown key with the file's path and a suggestion", () => {
    const file = join(dir, "typos.yaml");
    writeFileSync(file, "gatway:\n  port: 9443\nlrms:\n  backnd: slurm\nlogging:\n  levl: debug\n");
    let msg = "";
    try {
      loadConfig({ file, env: {} });
    } catch (e) {
      expect(e).toBeInstanceOf(ConfigError);
      msg = (e as Error).message;
    }
    expect(msg).not.toContain("\n");
    expect(msg).toContain(`unknown key "gatway" in ${file} (did you mean "gateway"?)`);
    expect(msg).toContain(`unknown key "lrms.backnd" in ${file} (did you mean "lrms.backend"?)`);
    expect(msg).toContain(`unknown key "logging.levl" in ${file} (did you mean "logging.level"?)`);
  });

  it("inside a list: the index is kept in the key and the suggestion", () => {
    expect(() => compileConfig({ jobs: { queues: [{ name: "a", maxWallTimeSecond: 60 }] } } as never, dir)).toThrow(
      /unknown key "jobs\.queues\.0\.maxWallTimeSecond" in the configuration \(did you mean "jobs\.queues\.0\.maxWallTimeSeconds"\?\)/,
    );
  });

  it("an unrelated name gets the keys known at that place instead of a guess", () => {
    expect(() => compileConfig({ logging: { colour: true } } as never, dir)).toThrow(
      /unknown key "logging\.colour" in the configuration \(known keys here: level, jemLogFile\)/,
    );
  });

  it("in the environment: the variable and the variable it should have been", () => {
    expect(() => loadConfig({ env: { CE__ADMIN__JEMPORT: "9445" } })).toThrow(
      new ConfigError("invalid configuration: unknown key CE__ADMIN__JEMPORT in the environment (did you mean CE__ADMIN__JEM_PORT?)"),
    );
    expect(() => loadConfig({ env: { CE__GATEWAY: '{"prot":1}' } })).toThrow(
      /unknown key "gateway\.prot" from CE__GATEWAY \(did you mean "gateway\.port"\?\)/,
    );
  });

  it("a bad value names the variable or the file it came from", () => {
    expect(() => loadConfig({ env: { CE__GATEWAY__PORT: "-1" } })).toThrow(
      /^invalid configuration: gateway\.port: .* \(-1 from CE__GATEWAY__PORT\)$/,
    );
    const file = join(dir, "badport.yaml");
    writeFileSync(file, "gateway:\n  port: 70000\n");
    expect(() => loadConfig({ file, env: {} })).toThrow(new RegExp(`gateway\\.port: .* \\(70000 in ${file}\\)$`));
  });

  it("a secret's value is not repeated in the message", () => {
    expect(() => loadConfig({ env: { CE__ADMIN__TOKEN: "[1]" } })).not.toThrow();
    expect(() => compileConfig({ admin: { token: 12345 } } as never, dir)).toThrow(/admin\.token: .*\(value hidden\)/);
  });

  it("a missing configuration file is one line naming it", () => {
    expect(() => loadConfig({ file: join(dir, "nope.yaml"), env: {} })).toThrow(
      new ConfigError(`cannot read the configuration file ${join(dir, "nope.yaml")}: no such file or directory`),
    );
  });
});

describe("environment names are derived from the schema", () => {
  it("every key outside a list has exactly one name, and each name reaches its key", () => {
    const keys = schemaKeys(configSchema).filter((k) => k.env);
    expect(new Set(keys.map((k) => k.env)).size).toBe(keys.length);
    expect(keys.find((k) => k.path.join(".") === "admin.jemPort")!.env).toBe("CE__ADMIN__JEM_PORT");
    expect(keys.find((k) => k.path.join(".") === "gateway.tls.certFile")!.env).toBe("CE__GATEWAY__TLS__CERT_FILE");
    expect(envOverrides({ CE__GATEWAY__LIMITS__IDS_PER_REQUEST: "5" })).toEqual({ gateway: { limits: { idsPerRequest: 5 } } });
  });

  it("a text key keeps a value that looks like a number", () => {
    expect(envOverrides({ CE__ENDPOINT__ADMIN_DOMAIN: "123" }).endpoint).toEqual({ adminDomain: "123" });
  });
});
