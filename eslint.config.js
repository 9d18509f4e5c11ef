import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["**/node_modules/**", "**/dist/**", ".ce/**", "tests/artifacts/**"] },
  ...tseslint.configs.recommended,
  {
    rules: {
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "@typescript-eslint/no-explicit-any": "error",
      "no-console": ["error", { allow: ["error", "warn"] }],
    },
  },
  {
    // CLIs, benchmarks, tests and the dev front door print to the terminal on purpose.
    files: ["**/bench/**", "**/cli.ts", "scripts/**", "tests/**", "**/test/**", "**/*.test.ts"],
    rules: { "no-console": "off" },
  },
);
