import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";

const run = promisify(execFile);
const root = fileURLToPath(new URL("..", import.meta.url));

describe("deploy/", () => {
  // Replays both images' pnpm install offline, so it takes a while; no Docker engine is needed.
  it("passes deploy/validate.sh (compose structure, Dockerfiles, stack config, image install replay)", async () => {
    const { stdout } = await run("bash", ["deploy/validate.sh"], { cwd: root, timeout: 240_000, maxBuffer: 10 * 1024 * 1024 }).catch(
      (e: { stdout?: string; stderr?: string; message: string }) => {
        throw new Error(`deploy/validate.sh failed:\n${e.stdout ?? ""}${e.stderr ?? ""}${e.message}`);
      },
    );
    expect(stdout).toMatch(/^deploy: valid/m);
    expect(stdout).not.toMatch(/^FAIL/m);
    expect(stdout).toMatch(/gateway\.Dockerfile\): replayed pnpm install/);
    expect(stdout).toMatch(/jem\.Dockerfile\): replayed pnpm install/);
  }, 300_000);
});
