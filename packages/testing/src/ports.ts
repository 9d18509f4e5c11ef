import { createServer } from "node:net";

/**
 * A loopback TCP port that was free a moment ago: the kernel picks it (listen on port 0), the probe
 * closes it again and the caller binds it. Another process may take it in between, so a fixture that
 * fails to bind should retry with a fresh port rather than assume the port is its own.
 */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.unref();
    s.on("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const addr = s.address();
      const port = typeof addr === "object" && addr ? addr.port : 0;
      s.close(() => resolve(port));
    });
  });
}
