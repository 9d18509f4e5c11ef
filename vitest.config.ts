import { defineConfig } from "vitest/config";

// One runner for the whole workspace. Unit tests are colocated (`*.test.ts` next to the code);
// integration suites live in `apps/*/test` and `tests/`. The global setup starts the project's
// own real redis-server (and Slurm when the suite needs it) — never a mock.
export default defineConfig({
  test: {
    include: [
      "packages/*/src/**/*.test.ts",
      "apps/*/src/**/*.test.ts",
      "apps/*/test/**/*.test.ts",
      "tests/**/*.test.ts",
      "scripts/**/*.test.ts",
    ],
    exclude: ["**/node_modules/**", "**/dist/**"],
    globalSetup: ["packages/testing/src/global-setup.ts"],
    testTimeout: 30_000,
    hookTimeout: 120_000,
    pool: "forks",
    reporters: ["default"],
  },
});
