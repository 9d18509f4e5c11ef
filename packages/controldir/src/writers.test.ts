import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";
import { type ControlFile, DIAGNOSE_FILES } from "./controldir.js";
import { CONTROL_FILES, type WriteKind, writerTableMarkdown } from "./writers.js";

/**
 * The writer table (writers.ts) holds: every write of a control file in the sources of apps/ and
 * packages/ is one the table lists for that module, and every listing is still a write somewhere.
 * A write is found the way it must be written: a ControlDir method naming the file
 * (`control.write(id, "status", …)`, `…Op`, `logState`), or a module's own helper called with the
 * file's name (`create("spec", …)` in jobfiles.ts, `write("grami", …)` in the batch back end).
 * A control file's path (`control.file(id, name)`) outside controldir.ts is for reading only:
 * anything else would write it unseen, and fails here unless listed below with its reason.
 */

const ROOT = join(import.meta.dirname, "../../..");
const NAMES = new Set(Object.keys(CONTROL_FILES));

/** Modules that take a control file's path for something other than a read operation, and why that is no write. */
const PATH_USES: Record<string, string> = {
  "apps/jem/src/poller.ts": "`lrms_done` path checked with exists() before the poller creates it through control.create",
  "apps/jem/src/priv/priv.ts": "readSmall() of `local` (the mapping), by path on the file thread",
  "packages/ops/src/joblog.ts": "ceadm reads `errors` (the job log) by path",
};

export interface Write {
  module: string;
  file: string;
  kind: WriteKind;
}

/** The arguments after the first of a call whose `(` is at `open`: the text from the first top-level comma. */
function afterFirstArg(src: string, open: number): string {
  let depth = 0;
  for (let i = open + 1; i < src.length; i++) {
    const c = src[i]!;
    if (c === "(" || c === "[" || c === "{") depth++;
    else if (c === ")" || c === "]" || c === "}") {
      if (depth === 0) return "";
      depth--;
    } else if (c === "," && depth === 0) return src.slice(i + 1, i + 200);
  }
  return "";
}

/** The control-file writes of one module's source, and its offences (a write the scan cannot name). */
export function scanWrites(module: string, src: string): { writes: Write[]; offences: string[] } {
  const writes: Write[] = [];
  const offences: string[] = [];
  for (const m of src.matchAll(/\bcontrol\.(write|create|append|remove)(?:Op)?\(/g)) {
    const name = /^\s*"([a-z_]+)"/.exec(afterFirstArg(src, m.index + m[0].length - 1))?.[1];
    if (name === undefined || !NAMES.has(name)) offences.push(`${module}: control.${m[1]}(…) without a control file's name as a literal`);
    else writes.push({ module, file: name, kind: m[1] as WriteKind });
  }
  for (const _ of src.matchAll(/\bcontrol\.logState\(/g)) writes.push({ module, file: "errors", kind: "append" });
  for (const m of src.matchAll(/(?<![\w.])(create|write|append)\(\s*"([a-z_]+)"/g)) {
    if (NAMES.has(m[2]!)) writes.push({ module, file: m[2]!, kind: m[1] as WriteKind });
  }
  for (const line of src.split("\n")) {
    if (!/\.file\(/.test(line)) continue;
    if (/\[\s*"(write|create|append|unlink|writeOwned)"\s*,[^\]]*\.file\(/.test(line))
      offences.push(`${module}: a raw write operation on a control file's path: ${line.trim()}`);
    else if (!/(\[\s*"(read|readSmall|exists|lexists)"\s*,|\bexists\()[^\]]*\.file\(/.test(line) && !(module in PATH_USES)) {
      offences.push(`${module}: a control file's path used for something other than a read: ${line.trim()}`);
    }
  }
  return { writes, offences };
}

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name);
    if (e.isDirectory()) return e.name === "testdata" || e.name === "node_modules" ? [] : sources(p);
    return e.name.endsWith(".ts") && !e.name.endsWith(".test.ts") ? [p] : [];
  });
}

function scanAll(): { writes: Write[]; offences: string[] } {
  const writes: Write[] = [];
  const offences: string[] = [];
  for (const top of ["apps", "packages"]) {
    for (const pkg of readdirSync(join(ROOT, top))) {
      let files: string[];
      try {
        files = sources(join(ROOT, top, pkg, "src"));
      } catch {
        continue;
      }
      for (const file of files) {
        const module = relative(ROOT, file);
        // The methods themselves: they take the name as a parameter.
        if (module === "packages/controldir/src/controldir.ts" || module === "packages/controldir/src/writers.ts") continue;
        const r = scanWrites(module, readFileSync(file, "utf8"));
        writes.push(...r.writes);
        offences.push(...r.offences);
      }
    }
  }
  return { writes, offences };
}

describe("the writer table (writers.ts) is the truth about who writes each control file", () => {
  const { writes, offences } = scanAll();

  it("every write of a control file in the sources is listed for its module and kind", () => {
    const unlisted = writes.filter((w) => !CONTROL_FILES[w.file as ControlFile].writers[w.module]?.includes(w.kind));
    expect(unlisted.map((w) => `${w.module} ${w.kind}s ${w.file}`)).toEqual([]);
  });

  it("no module writes a control file in a way the scan cannot name", () => {
    expect(offences).toEqual([]);
  });

  it("every listing is still a write in the sources (the table does not rot)", () => {
    const found = new Set(writes.map((w) => `${w.module} ${w.kind} ${w.file}`));
    const stale: string[] = [];
    for (const [file, spec] of Object.entries(CONTROL_FILES)) {
      for (const [module, kinds] of Object.entries(spec.writers))
        for (const k of kinds) if (!found.has(`${module} ${k} ${file}`)) stale.push(`${module} ${k} ${file}`);
    }
    expect(stale).toEqual([]);
  });

  it("every path a module is listed for taking still takes a control file's path", () => {
    for (const module of Object.keys(PATH_USES)) expect(readFileSync(join(ROOT, module), "utf8"), module).toMatch(/\.file\(/);
  });

  it("diagnose serves exactly the files the table marks as served; xml, input and output are never written (made on request)", () => {
    expect((Object.keys(CONTROL_FILES) as ControlFile[]).filter((f) => CONTROL_FILES[f].diagnose !== "never").sort()).toEqual(
      [...DIAGNOSE_FILES].sort(),
    );
    for (const file of ["xml", "input", "output"] as const) {
      expect(CONTROL_FILES[file].diagnose, file).toBe("rendered");
      expect(
        writes.filter((w) => w.file === file),
        file,
      ).toEqual([]);
    }
  });

  it("the scan sees each way of writing, and refuses the ways it cannot name", () => {
    const m = "apps/x/src/m.ts";
    expect(
      scanWrites(m, 'await ctx.control.write(job.id, "status", s, 0o644);\nops.push(this.control.appendOp(id, "errors", l));').writes,
    ).toEqual([
      { module: m, file: "status", kind: "write" },
      { module: m, file: "errors", kind: "append" },
    ]);
    expect(
      scanWrites(m, 'await control.remove(r.id, "failed"); await ctx.control.logState(id, a, b, why);').writes.map(
        (w) => `${w.kind} ${w.file}`,
      ),
    ).toEqual(["remove failed", "append errors"]);
    expect(
      scanWrites(m, 'create("spec", JSON.stringify(d)); write("batch.env", e); write("grami", g);').writes.map(
        (w) => `${w.kind} ${w.file}`,
      ),
    ).toEqual(["create spec", "write grami"]);
    expect(scanWrites(m, "await ctx.control.write(id, name, text);").offences).toHaveLength(1);
    expect(scanWrites(m, 'await fileq.one(["write", ctx.control.file(id, "status"), s, 0o644]);').offences).toHaveLength(1);
    expect(scanWrites(m, 'const p = ctx.control.file(id, "lrms_done");').offences).toHaveLength(1);
    expect(scanWrites(m, 'await fileq.run([["read", ctx.control.file(id, "local")]]);').offences).toEqual([]);
    expect(scanWrites(m, 'if (await exists(ctx.control.file(id, "lrms_done"))) return;').offences).toEqual([]);
  });
});

/** Within this package, the file system is changed by the file thread's operations (ops.ts) and the roots' creation only. */
describe("@ce/controldir changes the file system in ops.ts only", () => {
  const CHANGES =
    /\b(writeFile|appendFile|rm|rmdir|unlink|rename|mkdir|mkdtemp|chmod|chown|symlink|link|copyFile|cp|truncate|open|write|createWriteStream)(Sync)?\b/;
  const ALLOWED: Record<string, string[]> = {
    "ops.ts": ["*"],
    // ensureRoots/createJobDirs: the CE's own roots and a new job's two directories; openForRead reads.
    "controldir.ts": ["chmod", "mkdir", "open"],
  };
  it("no other module of the package imports a changing node:fs function", () => {
    const offences: string[] = [];
    for (const file of sources(import.meta.dirname)) {
      const rel = relative(import.meta.dirname, file);
      const allowed = ALLOWED[rel] ?? [];
      if (allowed.includes("*")) continue;
      for (const m of readFileSync(file, "utf8").matchAll(/import\s+(?!type\b)([^;]*?)\s+from\s+["'](?:node:)?fs(?:\/promises)?["']/g)) {
        const clause = m[1]!;
        if (!clause.trim().startsWith("{")) offences.push(`${rel}: the whole of node:fs`);
        for (const part of /\{([^}]*)\}/.exec(clause)?.[1]?.split(",") ?? []) {
          const name = part.trim().split(/\s+as\s+/)[0]!;
          const base = name.replace(/Sync$/, "");
          if (!name.startsWith("type ") && CHANGES.test(name) && !allowed.includes(base)) offences.push(`${rel}: ${name}`);
        }
      }
    }
    expect(offences).toEqual([]);
  });
});

describe("packages/controldir/README.md", () => {
  it("shows the writer table as writers.ts holds it (regenerate: writerTableMarkdown())", () => {
    const readme = readFileSync(join(import.meta.dirname, "../README.md"), "utf8");
    const m = /<!-- writer-table -->\n([\s\S]*?)\n<!-- \/writer-table -->/.exec(readme);
    expect(m?.[1]).toBe(writerTableMarkdown());
  });
});
