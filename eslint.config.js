import tseslint from "typescript-eslint";

/**
 * Module boundaries: packages never import apps; one app never imports the other; in the gateway,
 * routes → services → store and not back, and services use no middleware code (types aside: a
 * service may name what a middleware put on the request). One config object per file set: for a file in
 * several sets the last object's rule options win, so each repeats the restrictions it inherits.
 * Test fixtures: shared ones are @ce/testing (imported by name, by tests only), never another
 * workspace's test files by relative path; @ce/testing imports no app.
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
// Test kit: shared fixtures are @ce/testing, imported by name; only tests use it, and no
// workspace reaches into another's test files by relative path.
const noTesting = {
  group: ["@ce/testing", "@ce/testing/**"],
  message: "@ce/testing is the test kit: only tests, test support and fixtures may import it, never shipped code.",
};
const fixtureMessage =
  "shared test fixtures live in @ce/testing (import `@ce/testing/<name>`), a package's own kit behind its `/testing` export: never another workspace's test files by path.";
/** A package's own test kit beside its code (`@ce/x509/testing`, `@ce/mapping/testing`) by path instead of by name. */
const testKits = ["**/src/test-*", "**/src/testing*"];
/** From an app: the root `tests/`, @ce/testing's files, test kits (the other app's tests are covered by noJem/noGateway). */
const noFixturePathsApp = { group: ["**/tests/**", "**/testing/src/**", ...testKits], message: fixtureMessage };
/** From a package (tests colocated in src/): any test directory, @ce/testing's files, test kits. */
const noFixturePathsPkg = { group: ["**/tests/**", "**/test/**", "**/testing/src/**", ...testKits], message: fixtureMessage };
/**
 * From the system suites, benches and scripts: @ce/testing's files, test kits, any `tests/support`. An
 * app's own harness (under `apps/<app>/test/`: the gateway in-process, the JEM as a child) stays importable
 * here, since it needs the app and so cannot live in a package.
 */
const noFixturePathsTop = {
  group: ["**/tests/support/**", "**/testing/src/**", "**/packages/*/test/**", ...testKits],
  message: fixtureMessage,
};
/**
 * Purity: the domain (@ce/model) and the renderers (@ce/glue2) compute, they do no I/O, so they run
 * the same in the gateway, the JEM, ceadm and a browser test, and a unit test needs no server.
 */
const noIo = {
  group: [
    "node:fs",
    "node:fs/*",
    "fs",
    "fs/*",
    "node:child_process",
    "child_process",
    "node:net",
    "node:http",
    "node:https",
    "node:dgram",
    "node:worker_threads",
    "ioredis",
    "bullmq",
    "execa",
    "chokidar",
    "undici",
    "@ce/store",
    "@ce/controldir",
    "@ce/sessionfs",
  ],
  message: "@ce/model and @ce/glue2 are pure (no I/O): take the data as arguments and leave files, processes and Redis to the callers.",
};
/** Shipped source: everything under src/ except tests and the test kits that live beside the code. */
const testFiles = ["**/*.test.ts", "**/test-*.ts", "**/testing*.ts", "**/testdata/**", "packages/testing/**"];
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
  { files: ["tests/**", "bench/**", "scripts/**"], rules: restrict(noFixturePathsTop) },
  { files: ["packages/**"], rules: restrict(noApps, noFixturePathsPkg) },
  { files: ["packages/*/src/**"], ignores: testFiles, rules: restrict(noApps, noFixturePathsPkg, noTesting) },
  {
    files: ["packages/model/src/**", "packages/glue2/src/**"],
    ignores: testFiles,
    rules: restrict(noApps, noFixturePathsPkg, noTesting, noIo),
  },
  { files: ["packages/store/**"], rules: restrict(noApps, noFiles, noFixturePathsPkg) },
  { files: ["packages/store/src/**"], ignores: testFiles, rules: restrict(noApps, noFiles, noFixturePathsPkg, noTesting) },
  // The test kit itself: no app code (fixtures that need an app stay in that app's test/).
  { files: ["packages/testing/**"], rules: restrict(noApps, noFixturePathsPkg) },
  { files: ["apps/gateway/**"], rules: restrict(noJem, noFixturePathsApp) },
  { files: ["apps/gateway/src/**"], ignores: testFiles, rules: restrict(noJem, noFixturePathsApp, noTesting) },
  { files: ["apps/jem/**"], rules: restrict(noGateway, noFixturePathsApp) },
  { files: ["apps/jem/src/**"], ignores: testFiles, rules: restrict(noGateway, noFixturePathsApp, noTesting) },
  {
    files: ["apps/gateway/src/services/**"],
    ignores: testFiles,
    rules: restrict(noJem, noRoutes, noAppShell, noMiddleware, noFixturePathsApp, noTesting),
  },
  // A service's unit test may drive the app's routing helpers; the service code itself may not.
  { files: ["apps/gateway/src/services/**/*.test.ts"], rules: restrict(noJem, noRoutes, noFixturePathsApp) },
);
