import { accessSync, constants, existsSync } from "node:fs";
import { join, resolve } from "node:path";
import type { CompiledConfig } from "@ce/config";
import type { JobDescription } from "@ce/model";
import type { Logger } from "pino";
import { ContainedFork } from "../contain/fork.js";
import { ScriptBackend } from "./script-backend.js";
import { runnableScriptsDir } from "./scripts-copy.js";
import type { Backend } from "./types.js";

export * from "./types.js";
export { ScriptBackend, parsePollOutput, parseSubmitOutput } from "./script-backend.js";
export { TokenBucket } from "./rate-limit.js";
export { parseUsageOutput, type BatchUsage } from "./batch-usage.js";

/** The shipped scripts (fork, slurm, common/job-wrapper.sh). */
/** The shipped back-end scripts: beside the bundle (scripts/build-app.ts) or in the source tree. */
export const SHIPPED_SCRIPTS_DIR = existsSync(join(import.meta.dirname, "backends"))
  ? join(import.meta.dirname, "backends")
  : resolve(import.meta.dirname, "../../backends");

/** With mapping on, scripts the job's account cannot reach run from a private copy (scripts-copy.ts). */
function scriptsDirFor(config: CompiledConfig): string {
  return config.mapping ? runnableScriptsDir(config.lrms.scriptsDir) : config.lrms.scriptsDir;
}

/**
 * The configured back end: `<lrms.scriptsDir>/<lrms.backend>/{submit,cancel,poll}`. Any directory
 * with those three executables is a back end. The job wrapper comes from `<scriptsDir>/common`
 * when present there, else from the shipped one. Fails at boot when a script is missing. The fork
 * back end runs contained (src/contain): per-job cgroups and its limits kept by the JEM;
 * `description` gives a running job's limits after a restart.
 */
export function createBackend(
  config: CompiledConfig,
  log: Logger,
  deps: { description?: (jobId: string) => Promise<JobDescription | undefined> } = {},
): Backend {
  const name = config.lrms.backend;
  const dir = join(scriptsDirFor(config), name);
  for (const op of ["submit", "cancel", "poll"]) {
    try {
      accessSync(join(dir, op), constants.X_OK);
    } catch {
      throw new Error(`lrms back end "${name}": ${join(dir, op)} is missing or not executable`);
    }
  }
  let wrapperDir = config.lrms.scriptsDir;
  try {
    accessSync(join(wrapperDir, "common", "job-wrapper.sh"), constants.R_OK);
  } catch {
    wrapperDir = SHIPPED_SCRIPTS_DIR;
  }
  const backend = new ScriptBackend(name, { dir, wrapperDir, config, log });
  return name === "fork" ? new ContainedFork(backend, { config, log, ...deps }) : backend;
}

/**
 * The back end a job was submitted to (its record names it). One rule for every caller: the named
 * back end, or the only configured one when there is exactly one (records from before a rename);
 * with several and no match, none — a job is never handed to a batch system it did not name.
 */
export function backendFor(backends: ReadonlyMap<string, Backend>, name: string | undefined): Backend | undefined {
  const named = name ? backends.get(name) : undefined;
  if (named) return named;
  return backends.size === 1 ? backends.values().next().value : undefined;
}
