import { resolve } from "node:path";
import { ESLint } from "eslint";
import { describe, expect, it } from "vitest";

// The module boundaries of eslint.config.js, checked on sample imports so a config edit
// that silently drops one fails here, not in review.
const eslint = new ESLint({ cwd: resolve(import.meta.dirname, "..") });

async function restricted(file: string, from: string, kind: "value" | "type" = "value"): Promise<boolean> {
  const text =
    kind === "type" ? `import type { X } from "${from}";\nexport type Y = X;\n` : `import { x } from "${from}";\nexport { x };\n`;
  const [res] = await eslint.lintText(text, {
    filePath: resolve(import.meta.dirname, "..", file),
  });
  return (res?.messages ?? []).some((m) => m.ruleId === "@typescript-eslint/no-restricted-imports");
}

describe("import boundaries", () => {
  it.each([
    ["packages/store/src/x.ts", "../../../apps/jem/src/locks.js"],
    ["packages/model/src/x.ts", "node:fs/promises"],
    ["packages/model/src/description/x.ts", "ioredis"],
    ["packages/glue2/src/x.ts", "node:child_process"],
    ["packages/glue2/src/render/x.ts", "@ce/store"],
    ["packages/ops/src/x.ts", "@ce/gateway"],
    ["packages/model/src/x.ts", "@ce/jem/src/daemon.js"],
    ["apps/gateway/src/routes/x.ts", "../../../jem/src/locks.js"],
    ["apps/gateway/src/x.ts", "@ce/jem"],
    ["apps/jem/src/x.ts", "../../gateway/src/app.js"],
    ["apps/jem/test/x.ts", "@ce/gateway"],
    ["apps/gateway/src/services/x.ts", "../routes/jobs.js"],
    ["apps/gateway/src/services/x.ts", "../app.js"],
    ["apps/gateway/src/services/x.test.ts", "../routes/session.js"],
    ["apps/gateway/src/services/x.ts", "../middleware/identity/scopes.js"],
    ["apps/gateway/src/services/session/x.ts", "../../middleware/durability/hold.js"],
    // Test fixtures: by name from @ce/testing, never by relative path into another workspace.
    ["apps/jem/test/x.test.ts", "../../../tests/support/stack.js"],
    ["apps/gateway/test/x.test.ts", "../../jem/test/support/storage.js"],
    ["apps/jem/test/x.test.ts", "../../../packages/testing/src/redis.js"],
    ["packages/accounting/src/db/x.test.ts", "../../../../tests/support/postgres.js"],
    ["packages/mapping/src/x.test.ts", "../../x509/test/pki.js"],
    ["tests/arc/x.test.ts", "../../packages/testing/src/stack.js"],
    ["bench/ce/x.bench.ts", "../../tests/support/redis-server.js"],
    ["apps/jem/test/x.test.ts", "../../../packages/mapping/src/test-accounts.js"],
    ["tests/security/x.test.ts", "../../packages/mapping/src/test-accounts.js"],
    ["packages/ops/src/x.test.ts", "../../x509/src/testing.js"],
    // ... and the test kit only in tests: not in shipped source.
    ["apps/jem/src/x.ts", "@ce/testing"],
    ["apps/gateway/src/auth/x.ts", "@ce/testing/token-issuer"],
    ["apps/gateway/src/services/x.ts", "@ce/testing/redis"],
    ["packages/store/src/x.ts", "@ce/testing"],
    ["packages/ops/src/x.ts", "@ce/testing/redis"],
    // @ce/testing itself imports no app.
    ["packages/testing/src/x.ts", "../../../apps/jem/src/daemon.js"],
    ["packages/testing/src/x.ts", "@ce/gateway"],
  ])("%s may not import %s", async (file, from) => {
    expect(await restricted(file, from)).toBe(true);
  });

  it.each([
    ["packages/ops/src/x.ts", "@ce/store"],
    ["packages/model/src/x.ts", "fast-xml-parser"],
    ["packages/model/src/x.test.ts", "node:fs/promises"],
    ["packages/glue2/src/x.ts", "@ce/model"],
    ["apps/gateway/src/routes/x.ts", "../services/submit.js"],
    ["apps/gateway/src/services/x.ts", "@ce/store"],
    ["apps/gateway/src/services/x.ts", "../errors.js"],
    ["apps/jem/src/x.ts", "./locks.js"],
    ["tests/security/x.ts", "../../apps/gateway/src/server.js"],
    ["apps/jem/test/x.test.ts", "@ce/testing/slurm"],
    ["apps/jem/test/x.test.ts", "./support/child.js"],
    ["apps/jem/bench/x.bench.ts", "../test/support/child.js"],
    ["apps/gateway/src/auth/x.test.ts", "@ce/testing/token-issuer"],
    ["apps/gateway/src/services/x.test.ts", "@ce/testing"],
    ["apps/jem/src/lrms/testdata/x.ts", "@ce/testing"],
    ["packages/accounting/src/db/x.test.ts", "@ce/testing/postgres"],
    ["packages/store/src/x.test.ts", "@ce/testing"],
    ["packages/testing/src/x.ts", "./redis.js"],
    ["packages/testing/src/x.ts", "@ce/x509/testing"],
    ["packages/x509/src/testing.ts", "./testing-pki.js"],
    ["tests/security/x.test.ts", "@ce/mapping/testing"],
    ["tests/arc/x.test.ts", "@ce/testing/stack"],
    ["tests/arc/x.test.ts", "../support/local.js"],
    ["tests/soak/x.soak.ts", "../../apps/jem/test/support/soak.js"],
    ["bench/lib/x.ts", "../../apps/jem/test/support/child.js"],
  ])("%s may import %s", async (file, from) => {
    expect(await restricted(file, from)).toBe(false);
  });

  it("a service may name a middleware's type (what it put on the request), not run its code", async () => {
    expect(await restricted("apps/gateway/src/services/x.ts", "../middleware/durability/hold.js", "type")).toBe(false);
  });
});
