import { randomUUID } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { compileConfig, type CompiledConfig, type ConfigInput } from "@ce/config";
import { emptyDescription, type JobDescription } from "@ce/model";
import { pino } from "pino";
import type { BatchJobSpec } from "../types.js";
import { waitFor as poll } from "@ce/testing";

/** Test-only helpers for the lrms suites (temp dirs, config, job specs, polling). */

export const SHIPPED = resolve(import.meta.dirname, "../../../backends");
export const FAKE_BACKENDS = resolve(import.meta.dirname, "fake-backends");
export const silentLog = pino({ level: "silent" });

export function tempRoot(prefix = "ce-lrms-"): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

export function makeConfig(root: string, lrms: ConfigInput["lrms"] = {}, extra: ConfigInput = {}): CompiledConfig {
  return compileConfig({
    ...extra,
    paths: { stateDir: root, rteDir: join(root, "rte") },
    lrms: { scriptsDir: SHIPPED, ...lrms },
  });
}

export function makeJob(
  root: string,
  desc: Partial<JobDescription> = {},
  opts: Partial<Omit<BatchJobSpec, "description">> = {},
): BatchJobSpec {
  const jobId = opts.jobId ?? randomUUID();
  const sessionDir = join(root, "session", jobId);
  const jobDir = join(root, "control", jobId);
  mkdirSync(sessionDir, { recursive: true });
  mkdirSync(jobDir, { recursive: true });
  mkdirSync(join(root, "rte"), { recursive: true });
  return {
    jobId,
    owner: "/DC=test/CN=tester",
    sessionDir,
    jobDir,
    queue: "main",
    rteDir: join(root, "rte"),
    runtimeEnvironments: [],
    ...opts,
    description: { ...emptyDescription("nordugrid:xrsl"), ...desc },
  };
}

export function readIf(file: string): string | undefined {
  return existsSync(file) ? readFileSync(file, "utf8") : undefined;
}

/** Polls `fn` until it returns a value other than undefined. */
export async function waitFor<T>(fn: () => Promise<T | undefined> | T | undefined, timeoutMs: number, stepMs = 200): Promise<T> {
  return poll("the back end's answer", fn, timeoutMs, { everyMs: stepMs });
}

/** key=value lines of a diag file. */
export function parseDiag(text: string | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of (text ?? "").split("\n")) {
    const i = line.indexOf("=");
    if (i > 0) out[line.slice(0, i)] = line.slice(i + 1);
  }
  return out;
}
