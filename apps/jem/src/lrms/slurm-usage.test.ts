import { chmodSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { createBackend, type Backend } from "./index.js";
import { makeConfig, silentLog, tempRoot } from "./testdata/harness.js";

// The shipped slurm/usage script against a fake sacct: accounting storage first (CPU, the largest
// step MaxRSS, a requeued job's last run), the job completion log when storage is disabled.

let bin: string;
let backend: Backend;

/** sacct answers `sacct.db` without -c (or fails like Slurm without slurmdbd), `sacct.comp` with -c. */
function fakeSacct(db: string | undefined, comp: string) {
  writeFileSync(join(bin, "sacct.comp"), comp);
  if (db === undefined) writeFileSync(join(bin, "sacct.db"), "");
  else writeFileSync(join(bin, "sacct.db"), db);
  writeFileSync(
    join(bin, "sacct"),
    `#!/bin/bash\nd=\${0%/*}\n[[ $SLURM_TIME_FORMAT == %s ]] || exit 9\nif [[ $1 == -c ]]; then cat "$d/sacct.comp"; exit; fi\n[[ -s $d/sacct.db ]] || { echo "Slurm accounting storage is disabled" >&2; exit 1; }\ncat "$d/sacct.db"\n`,
  );
  chmodSync(join(bin, "sacct"), 0o755);
}

beforeAll(() => {
  const root = tempRoot("ce-susage-");
  bin = join(root, "bin");
  mkdirSync(bin);
  backend = createBackend(
    makeConfig(root, { backend: "slurm", callsPerSecond: 1000, slurm: { binPath: bin, extraDirectives: [] } }),
    silentLog,
  );
});

describe("slurm usage", () => {
  it("reads accounting storage: CPU user/system, the largest step's MaxRSS, the last run of a requeued job", async () => {
    fakeSacct(
      [
        "201|1700000000|1700000100|100|01:30.600|01:20.000|00:10.600||4|1|n1",
        "201.batch|1700000000|1700000100|100|01:30.600|01:20.000|00:10.600|2048K|4|1|n1",
        "201.0|1700000001|1700000099|98|00:00:01|00:00:01|00:00:00|1.5G|4|1|n1",
        "202|1700000000|1700000050|50|00:10|00:10|00:00||1|1|n2",
        "202|1700000100|1700003700|3600|1-00:00:00|23:00:00|01:00:00|10M|16|2|n[1-2]",
        "999|1|2|1|||||1|1|x",
      ].join("\n"),
      "",
    );
    const u = await backend.usage!([
      { jobId: "jA", localId: "201" },
      { jobId: "jB", localId: "202" },
      { jobId: "jC", localId: "203" },
    ]);
    expect(u.get("jA")).toEqual({
      source: "sacct",
      start: 1700000000,
      end: 1700000100,
      wall: 100,
      cpu: 91,
      cpuUser: 80,
      cpuSystem: 11,
      maxRssKb: 1572864,
      processors: 4,
      nodeCount: 1,
      nodes: "n1",
    });
    expect(u.get("jB")).toEqual({
      source: "sacct",
      start: 1700000100,
      end: 1700003700,
      wall: 3600,
      cpu: 86400,
      cpuUser: 82800,
      cpuSystem: 3600,
      maxRssKb: 10240,
      processors: 16,
      nodeCount: 2,
      nodes: "n[1-2]",
    });
    expect(u.has("jC")).toBe(false);
  });

  it("a job slurmdbd has not yet seen end gives no figures (not the zeros of a running job)", async () => {
    // As sacct shows a job that squeue already lists as COMPLETED: the allocation row without an
    // end (its state lags), CPU still zero; a requeued job's new run likewise.
    fakeSacct(
      [
        "501|1700000000|Unknown|0|00:00:00|00:00:00|00:00:00||0|1|n1",
        "501.batch|1700000000|Unknown|0|00:00:00|00:00:00|00:00:00||1|1|n1",
        "502|1700000000|1700000050|50|00:10|00:10|00:00||1|1|n2",
        "502|1700000100|Unknown|3|00:00:00|00:00:00|00:00:00||1|1|n2",
        "503|1700000000|1700000009|9|00:07.400|00:06.000|00:01.400||1|1|n1",
        "503.batch|1700000000|1700000009|9|00:07.400|00:06.000|00:01.400|170000K|1|1|n1",
      ].join("\n"),
      "",
    );
    const u = await backend.usage!([
      { jobId: "jA", localId: "501" },
      { jobId: "jB", localId: "502" },
      { jobId: "jC", localId: "503" },
    ]);
    expect(u.has("jA")).toBe(false);
    expect(u.has("jB")).toBe(false);
    expect(u.get("jC")).toMatchObject({ source: "sacct", end: 1700000009, cpu: 7, cpuUser: 6, cpuSystem: 1, maxRssKb: 170000 });
  });

  it("without accounting storage reads the job completion log: times, processors, nodes, no CPU or memory", async () => {
    fakeSacct(undefined, "301|1700000000|1700000007|7|||||2|1|localhost\n");
    const u = await backend.usage!([{ jobId: "jA", localId: "301" }]);
    expect(u.get("jA")).toEqual({
      source: "jobcomp",
      start: 1700000000,
      end: 1700000007,
      wall: 7,
      processors: 2,
      nodeCount: 1,
      nodes: "localhost",
    });
  });

  it("hostile output is dropped field by field; a failed sacct gives no figures, not an error", async () => {
    fakeSacct(undefined, "401|17e9|-5|7 evil=1|x|||;rm|2|1|a b\n");
    expect((await backend.usage!([{ jobId: "jA", localId: "401" }])).get("jA")).toEqual({ source: "jobcomp", processors: 2, nodeCount: 1 });
    writeFileSync(join(bin, "sacct"), "#!/bin/bash\nexit 1\n");
    expect((await backend.usage!([{ jobId: "jA", localId: "401" }])).size).toBe(0);
  });
});
