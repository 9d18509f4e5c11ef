import type { CompiledConfig } from "@ce/config";
import { runDoctor } from "./index.js";

/** `ceadm doctor`: every problem, fatal first, each with its fix; exit 0 only when there is none. */
export async function doctorCommand(c: CompiledConfig, file: string | undefined, json: boolean, out: (s: string) => void): Promise<number> {
  const problems = await runDoctor(c, file ? { file } : {});
  if (json) out(JSON.stringify({ ok: problems.length === 0, problems }, null, 2));
  else if (problems.length === 0) out("doctor: no problems found");
  else {
    for (const p of problems) out(`${p.severity === "fatal" ? "FATAL  " : "WARNING"} ${p.check}: ${p.message}\n        fix: ${p.fix}`);
    const f = problems.filter((p) => p.severity === "fatal").length;
    out(`doctor: ${problems.length} problem(s), ${f} fatal (a fatal one stops the gateway and the JEM at start)`);
  }
  return problems.length === 0 ? 0 : 1;
}
