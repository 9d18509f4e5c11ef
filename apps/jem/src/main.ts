import { loadConfig } from "@ce/config";
import { pino } from "pino";
import { startJem } from "./daemon.js";

/** `pnpm --filter @ce/jem start`: config from CE_CONFIG + CE__* overrides; SIGTERM/SIGINT stop gracefully. */
const config = loadConfig();
const log = pino({ level: config.logging.level, base: { service: "jem", pid: process.pid } });
const jem = await startJem(config, { logger: log });

let signals = 0;
for (const sig of ["SIGTERM", "SIGINT"] as const) {
  process.on(sig, () => {
    if (++signals > 1) process.exit(1); // a second signal: stop waiting
    log.info({ signal: sig }, "shutting down");
    jem.stop().then(
      () => process.exit(0),
      (e: unknown) => {
        log.error({ err: e }, "shutdown failed");
        process.exit(1);
      },
    );
  });
}
