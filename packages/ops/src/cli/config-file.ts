import { statSync } from "node:fs";
import { dirname, join, resolve } from "node:path";

/**
 * Which configuration file `ceadm` reads, the way an operator expects after `./ce start`:
 * `--config FILE`, else `CE_CONFIG` (set but empty: none, only `CE__*`), else the nearest
 * `.ce/ce.yaml` from the working directory up to the root, as git finds `.git` (`./ce start`
 * writes it there, `CE_STATE_DIR` elsewhere). Without any, the services' defaults apply.
 */
export const DISCOVERED_NAME = join(".ce", "ce.yaml");

export function findConfigFile(start: string): string | undefined {
  let dir = resolve(start);
  for (;;) {
    const candidate = join(dir, DISCOVERED_NAME);
    try {
      if (statSync(candidate).isFile()) return candidate;
    } catch {
      // Absent or unreadable here: keep walking up.
    }
    const up = dirname(dir);
    if (up === dir) return undefined;
    dir = up;
  }
}

export function chooseConfigFile(
  flag: string | undefined,
  env: NodeJS.ProcessEnv,
  cwd: string,
): { file?: string | undefined; how: "flag" | "CE_CONFIG" | "found" | "none" } {
  if (flag) return { file: flag, how: "flag" };
  if (env.CE_CONFIG !== undefined) return env.CE_CONFIG ? { file: env.CE_CONFIG, how: "CE_CONFIG" } : { how: "none" };
  const found = findConfigFile(cwd);
  return found ? { file: found, how: "found" } : { how: "none" };
}
