import { Failure } from "@ce/model";
import type { CompiledConfig } from "@ce/config";
import { accountProblems } from "./accounts.js";
import { directoryProblems, diskProblems } from "./dirs.js";
import { batchProblems, redisProblems } from "./host.js";
import { caDirProblems, endpointProblems, hostCertProblems, vomsDirProblems } from "./pki.js";
import { type Problem, problemLine } from "./problem.js";

export { type Check, type Problem, problemLine } from "./problem.js";

export interface DoctorOptions {
  /** The process running the checks at its start; absent: `ceadm doctor`. */
  role?: "gateway" | "jem";
  /** The configuration file, for the fixes ("set endpoint.url in /etc/ce/ce.yaml"). */
  file?: string;
  /** Bound on each network or batch-system call. */
  timeoutMs?: number;
  now?: Date;
}

/**
 * Every check of `ceadm doctor`, fatal problems first. The gateway and the JEM run the same at
 * start (`startupChecks`), so a site sees one list of problems, said the same way, wherever it looks.
 */
export async function runDoctor(c: CompiledConfig, o: DoctorOptions = {}): Promise<Problem[]> {
  const file = o.file ?? process.env.CE_CONFIG ?? "the configuration file";
  const timeoutMs = o.timeoutMs ?? 5_000;
  const { problems: accounts, accounts: mapped } = await accountProblems(c, o.role);
  const [redis, batch] = await Promise.all([redisProblems(c, timeoutMs, o.role ? [o.role] : undefined), batchProblems(c, timeoutMs)]);
  const all = [
    ...endpointProblems(c, file, o.role),
    ...hostCertProblems(c, o.now),
    ...caDirProblems(c, o.now),
    ...vomsDirProblems(c),
    ...redis,
    ...directoryProblems(c, mapped, o.role),
    ...accounts,
    ...batch,
    ...diskProblems(c),
  ];
  return [...all.filter((p) => p.severity === "fatal"), ...all.filter((p) => p.severity === "warning")];
}

/** A start refused by a fatal doctor problem; its message is the problem's line (and the rest, counted). */
export class StartupCheckError extends Failure<"STARTUP_CHECK"> {
  constructor(readonly problems: Problem[]) {
    super(
      "STARTUP_CHECK",
      problems.length === 1
        ? problemLine(problems[0]!)
        : `${problemLine(problems[0]!)} (and ${problems.length - 1} more: ${problems.slice(1).map(problemLine).join(" | ")})`,
    );
  }
}

/**
 * The doctor's checks at the start of a gateway or JEM: warnings go to the log, one line each with
 * its fix; fatal problems throw `StartupCheckError` (the caller's failStartup prints it and exits 1).
 * `CE_STARTUP_CHECKS=off` skips them (a site that must start despite them, e.g. to drain).
 */
export async function startupChecks(
  role: "gateway" | "jem",
  c: CompiledConfig,
  log: { warn: (obj: object, msg: string) => void },
  env: NodeJS.ProcessEnv = process.env,
): Promise<Problem[]> {
  if (env.CE_STARTUP_CHECKS === "off") return [];
  const problems = (await runDoctor(c, { role, timeoutMs: 2_000 })).filter((p) => p.atStart !== false);
  for (const p of problems.filter((x) => x.severity === "warning")) log.warn({ check: p.check, fix: p.fix }, `doctor: ${p.message}`);
  const fatal = problems.filter((p) => p.severity === "fatal");
  if (fatal.length > 0) throw new StartupCheckError(fatal);
  return problems;
}
