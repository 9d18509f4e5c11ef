import tseslint from "typescript-eslint";

/**
 * Module boundaries: packages never import apps; one app never imports the other; in the gateway,
 * routes → services → store and not back, and services use no middleware code (types aside: a
 * service may name what a middleware put on the request). One config object per file set: for a file in
 * several sets the last object's rule options win, so each repeats the restrictions it inherits.
 */
const noApps = {
  group: ["**/apps/**", "@ce/gateway", "@ce/gateway/**", "@ce/jem", "@ce/jem/**"],
  message: "packages must not import apps (move the shared code into a package).",
};
const noJem = {
  group: ["@ce/jem", "@ce/jem/**", "**/jem/**"],
  message: "the gateway must not import the JEM (share code through packages/).",
};
const noGateway = {
  group: ["@ce/gateway", "@ce/gateway/**", "**/gateway/**"],
  message: "the JEM must not import the gateway (share code through packages/).",
};
const noRoutes = { group: ["**/routes/**", "**/routes"], message: "services must not import routes: routes → services → store, not back." };
const noAppShell = {
  group: ["../app.js", "../server.js", "../main.js"],
  message: "services must not import the app shell (it imports the routes).",
};
const noFiles = {
  group: ["@ce/controldir", "@ce/controldir/**", "**/controldir/**"],
  message: "@ce/store is the Redis side; the control directory (@ce/controldir) builds on it, not back.",
};
const noMiddleware = {
  group: ["**/middleware/**"],
  message: "services must not run middleware code: take what they need from the request context or a package.",
  allowTypeImports: true,
};
const restrict = (...patterns) => ({ "no-restricted-imports": "off", "@typescript-eslint/no-restricted-imports": ["error", { patterns }] });

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
  { files: ["packages/**"], rules: restrict(noApps) },
  { files: ["packages/store/**"], rules: restrict(noApps, noFiles) },
  { files: ["apps/gateway/**"], rules: restrict(noJem) },
  { files: ["apps/jem/**"], rules: restrict(noGateway) },
  { files: ["apps/gateway/src/services/**"], rules: restrict(noJem, noRoutes, noAppShell, noMiddleware) },
  // A service's unit test may drive the app's routing helpers; the service code itself may not.
  { files: ["apps/gateway/src/services/**/*.test.ts"], rules: restrict(noJem, noRoutes) },
);
