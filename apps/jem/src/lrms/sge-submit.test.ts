import { execFileSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { JobDescription } from "@ce/model";
import { createBackend } from "./index.js";
import { makeConfig, makeJob, silentLog, tempRoot } from "./testdata/harness.js";
import type { BatchJobSpec } from "./types.js";

// The shipped sge/submit script against a fake `qsub` that only records its argv and prints an id:
// description values must reach the generated <jobdir>/qsub.sh as data, never as a #$ option or code.

let root: string;
let bin: string;
const savedRoot = process.env.SGE_ROOT;

beforeAll(() => {
  root = tempRoot("ce-qsub-");
  bin = join(root, "bin");
  mkdirSync(bin);
  writeFileSync(join(bin, "qsub"), `#!/bin/bash\necho "$*" >> "\${2%/*}/qsub.argv"\necho 4343\n`);
  chmodSync(join(bin, "qsub"), 0o755);
  process.env.SGE_ROOT = root; // the script only checks that a cell is named
});
afterAll(() => {
  if (savedRoot === undefined) delete process.env.SGE_ROOT;
  else process.env.SGE_ROOT = savedRoot;
});

const backend = () => createBackend(makeConfig(root, { backend: "sge", sge: { binPath: bin } }), silentLog);

async function submit(desc: Partial<JobDescription>, opts: Partial<BatchJobSpec> = {}) {
  const spec = makeJob(root, desc, opts);
  const r = await backend().submit(spec);
  const script = readFileSync(join(spec.jobDir, "qsub.sh"), "utf8");
  return { spec, localId: r.localId, script, options: script.split("\n").filter((l) => l.startsWith("#$")) };
}

describe("sge submit: hostile description values", () => {
  it.each([
    ["$(touch /tmp/ce-sge-pwned)", "N__touch__tmp_c"],
    ["x\n#$ -u root", "x_____u_root"],
    ["a'b\"c`d`;e", "a_b_c_d__e"],
    ["", "gridjob"],
  ])("job name %j is only the name %s", async (name, want) => {
    const { options } = await submit({ jobName: name });
    expect(options.filter((o) => o.startsWith("#$ -N "))).toEqual([`#$ -N ${want}`]);
    expect(options.some((o) => /[$`'"]|-u /.test(o.slice(2)))).toBe(false);
  });

  it("arguments, environment and name survive verbatim when the script runs, nothing is executed", async () => {
    const nasty = ["$(touch pwned1)", "`touch pwned2`", "a'b", 'c"d', "line1\nline2", "; touch pwned3 #", "\\", "$HOME", "#$ -l h_rt=1"];
    const { spec, script, options } = await submit({
      jobName: "$(touch pwned0)",
      executable: "/usr/bin/printf",
      arguments: ["%s\\0", ...nasty],
      environment: [{ name: "EVIL", value: "$(touch pwned4)'\"\n`x`" }],
      stdout: "out",
    });
    expect(options.filter((o) => o.includes("h_rt"))).toEqual([]);
    expect(script).not.toMatch(/^[^'\n]*\$\(touch/m); // never outside single quotes
    // Run the generated batch script directly (what the execution daemon would do), minus Grid Engine.
    execFileSync("/bin/bash", [join(spec.jobDir, "qsub.sh")], { cwd: spec.sessionDir, env: { PATH: process.env.PATH ?? "" } });
    const out = readFileSync(join(spec.sessionDir, "out"), "utf8").split("\0");
    expect(out.slice(0, nasty.length)).toEqual(nasty);
    for (let i = 0; i < 5; i++) expect(existsSync(join(spec.sessionDir, `pwned${i}`))).toBe(false);
  });

  // qsub reads every line that starts with #$, also below the header: a value with a newline then
  // #$ would be an option of its own (another queue, no limits). Such a job is refused, qsub never runs.
  it.each([
    ["an argument", { arguments: ["ok\n#$ -q admin.q"] }],
    ["an environment value", { environment: [{ name: "V", value: "x\n#$ -l h_rt=999999" }] }],
  ])("a newline followed by #$ in %s is refused", async (_what, desc: Partial<JobDescription>) => {
    const spec = makeJob(root, { executable: "/bin/true", ...desc });
    await expect(backend().submit(spec)).rejects.toMatchObject({ code: "SUBMIT_FAILED", message: expect.stringContaining("'#$'") });
    expect(existsSync(join(spec.jobDir, "qsub.argv"))).toBe(false);
  });

  it("a queue that cannot be a #$ option is refused; a project with odd characters is left out", async () => {
    for (const partition of ["main\n#$ -u root", "a b", "q,other", "$(id)"]) {
      const spec = makeJob(root, { executable: "/bin/true" }, { partition });
      await expect(backend().submit(spec)).rejects.toMatchObject({ code: "SUBMIT_FAILED", message: expect.stringContaining("queue") });
      expect(existsSync(join(spec.jobDir, "qsub.argv"))).toBe(false);
    }
    const { options } = await submit({ projectName: "atlas\n#$ -u root" });
    expect(options.filter((o) => o.startsWith("#$ -A") || o.includes("-u"))).toEqual([]);
  });
});
