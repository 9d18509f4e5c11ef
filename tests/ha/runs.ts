import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { CeClient } from "./client.js";

/**
 * Jobs that prove whether they ran: each appends its tag and job id to one log file outside the
 * CE (readable and writable by the account jobs run as). The at-most-once tests compare that log
 * with the 201s the client received.
 */
export interface RunLog {
  /** xRSL of one job per tag (one request). */
  xrsl(tags: readonly string[]): string;
  /** One entry per run: the job's tag and its id. */
  runs(): { tag: string; id: string }[];
  remove(): void;
}

export function runLog(): RunLog {
  const dir = mkdtempSync(join(tmpdir(), "ce-runs-"));
  const log = join(dir, "ran.log");
  const script = join(dir, "ran.sh");
  writeFileSync(script, `#!/bin/sh\necho "$1 $(pwd)" >> ${log}\n`);
  // Jobs may run as a mapped account (a stack started as root maps to its job account).
  writeFileSync(log, "");
  chmodSync(dir, 0o755);
  chmodSync(script, 0o755);
  chmodSync(log, 0o666);
  const one = (tag: string) => `(&(executable="${script}")(arguments="${tag}")(jobname="${tag}"))`;
  return {
    xrsl: (tags) => (tags.length === 1 ? `&${one(tags[0]!).slice(2, -1)}` : `+${tags.map(one).join("")}`),
    runs: () =>
      existsSync(log)
        ? readFileSync(log, "utf8")
            .split("\n")
            .filter(Boolean)
            .map((l) => {
              const [tag = "", path = ""] = l.split(" ");
              return { tag, id: path.slice(path.lastIndexOf("/") + 1) };
            })
        : [],
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/** Every job id of the client's identity (GET /jobs), whoever's request created it. */
export async function allJobIds(ce: CeClient, base: string): Promise<string[]> {
  const r = await ce.call("GET", `${base}/rest/1.1/jobs`);
  if (r.status !== 200) throw new Error(`job list: HTTP ${r.status} ${r.body.slice(0, 200)}`);
  const doc = JSON.parse(r.body) as { job?: { id: string } | { id: string }[] };
  return doc.job === undefined ? [] : (Array.isArray(doc.job) ? doc.job : [doc.job]).map((j) => j.id);
}

/** What the at-most-once promise forbids, from the run log and the ids of the 201s received. */
export function broken(
  runs: readonly { tag: string; id: string }[],
  acked: ReadonlySet<string>,
): { ranTwice: string[]; ranUnacknowledged: string[] } {
  const seen = new Map<string, number>();
  for (const r of runs) seen.set(r.tag, (seen.get(r.tag) ?? 0) + 1);
  return {
    ranTwice: [...seen].filter(([, n]) => n > 1).map(([t]) => t),
    ranUnacknowledged: runs.filter((r) => !acked.has(r.id)).map((r) => `${r.tag} ${r.id}`),
  };
}
