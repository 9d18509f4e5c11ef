// The dependency-free helpers; each fixture that starts a server has its own subpath
// (`@ce/testing/redis`, `@ce/testing/slurm`, ...) so a test loads only what it uses.
export { freePort } from "./ports.js";
export { quietPeriod, waitFor, WaitTimeoutError, type WaitOptions } from "./wait.js";
