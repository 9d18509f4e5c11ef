import { spawn, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";
import type { CompiledConfig } from "@ce/config";

const SCRIPT = fileURLToPath(new URL("./jem-child.ts", import.meta.url));

/** Starts `jem-child.ts` under tsx and resolves once it printed "ready". */
export async function spawnJem(config: CompiledConfig, env: Record<string, string> = {}): Promise<ChildProcess> {
  const child = spawn(process.execPath, ["--import", "tsx", SCRIPT], {
    cwd: fileURLToPath(new URL("../../../..", import.meta.url)),
    env: { ...process.env, ...env, JEM_CHILD_CONFIG: JSON.stringify(config) },
    stdio: ["ignore", "pipe", "inherit"],
  });
  await new Promise<void>((resolve, reject) => {
    let out = "";
    child.stdout!.on("data", (d: Buffer) => {
      out += d.toString();
      if (out.includes("ready")) resolve();
    });
    child.once("exit", (code) => reject(new Error(`JEM child exited early (${code})`)));
  });
  return child;
}

export async function killHard(child: ChildProcess): Promise<void> {
  const gone = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  child.kill("SIGKILL");
  await gone;
}
