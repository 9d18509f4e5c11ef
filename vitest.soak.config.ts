import { defineConfig } from "vitest/config";

// `pnpm soak`: long crash soaks (tests/soak/*.soak.ts), kept out of `pnpm test`. Same global setup
// (the project's own redis-server); one file at a time, output shown as it comes.
export default defineConfig({
  test: {
    include: ["tests/soak/**/*.soak.ts"],
    globalSetup: ["packages/testing/src/global-setup.ts"],
    testTimeout: 900_000,
    hookTimeout: 120_000,
    pool: "forks",
    fileParallelism: false,
    reporters: ["default"],
  },
});
