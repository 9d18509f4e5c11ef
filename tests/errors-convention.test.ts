import { readdirSync, readFileSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";

// One convention for errors (packages/model/src/failure.ts): every error class derives from
// Failure (a stable `code`, the class's name) or, for HTTP answers, from the gateway's CeError.
const ROOT = resolve(import.meta.dirname, "..");

function sources(dir: string): string[] {
  const out: string[] = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    if (e.name === "node_modules" || e.name === "dist") continue;
    const p = join(dir, e.name);
    if (e.isDirectory()) out.push(...sources(p));
    else if (/\.tsx?$/.test(e.name) && !/\.test\.tsx?$/.test(e.name)) out.push(p);
  }
  return out;
}

const files = ["apps", "packages"]
  .flatMap((d) => readdirSync(join(ROOT, d)).map((p) => join(ROOT, d, p, "src")))
  .flatMap((d) => {
    try {
      return sources(d);
    } catch {
      return [];
    }
  });

/** `class X extends Base` declarations whose base is one of `bases`, as "file: X extends Base". */
function subclassesOf(bases: RegExp): string[] {
  return files.flatMap((f) =>
    [...readFileSync(f, "utf8").matchAll(/class (\w+)(?:<[^>]*>)? extends (\w+)/g)]
      .filter((m) => bases.test(m[2]!))
      .map((m) => `${relative(ROOT, f)}: ${m[1]} extends ${m[2]}`),
  );
}

describe("error classes", () => {
  it("derive from Failure, never from Error directly", () => {
    expect(files.length).toBeGreaterThan(100);
    expect(subclassesOf(/^(Error|TypeError|RangeError)$/)).toEqual(["packages/model/src/failure.ts: Failure extends Error"]);
  });

  it("HTTP answers derive from the gateway's CeError, the one HTTPException subclass", () => {
    expect(subclassesOf(/^HTTPException$/)).toEqual(["apps/gateway/src/errors.ts: CeError extends HTTPException"]);
  });

  it("take their name from the class, not from a string that can drift", () => {
    const named = files.filter((f) => /this\.name = "/.test(readFileSync(f, "utf8"))).map((f) => relative(ROOT, f));
    expect(named).toEqual([]);
  });
});
