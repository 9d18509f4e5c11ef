import { spawn, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";
import type { CompiledConfig } from "@ce/config";

const SCRIPT = fileURLToPath(new URL("./jem-child.ts", import.meta.url));

/** Starts `jem-child.ts` under tsx and resolves once it printed "ready". */
export async function spawnJem(config: CompiledConfig, env: Record<string, string> = {}): Promise<ChildProcess> {
  const extra = process.env.JEM_CHILD_NODE_ARGS ? process.env.JEM_CHILD_NODE_ARGS.split(" ") : [];
  const child = spawn(process.execPath, [...extra, "--import", "tsx", SCRIPT], {
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

/** SIGTERM (graceful stop, flushes --cpu-prof), SIGKILL after `ms`. */
export async function stopGracefully(child: ChildProcess, ms = 15_000): Promise<void> {
  if (child.exitCode !== null) return;
  const gone = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  child.kill("SIGTERM");
  const t = setTimeout(() => child.kill("SIGKILL"), ms);
  await gone;
  clearTimeout(t);
}
