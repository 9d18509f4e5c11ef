import { isIP, type Server, type Socket } from "node:net";
import type { Logger } from "pino";

/**
 * Per-client-address connection cap. Counted on the raw TCP connection (before TLS, so a client
 * cannot hold many half-open handshakes either); a connection over the cap is closed at once.
 * Trusted proxies are exempt: every client behind them shares their address.
 */
export function capConnectionsPerAddress(server: Server, max: number, exempt: readonly string[], log: Logger): void {
  if (max <= 0) return;
  const open = new Map<string, number>();
  const trusted = new Set(exempt.map(normalize));
  let refused = 0;
  let lastLog = 0;
  server.on("connection", (socket: Socket) => {
    const addr = normalize(socket.remoteAddress ?? "");
    if (trusted.has(addr)) return;
    const n = (open.get(addr) ?? 0) + 1;
    if (n > max) {
      socket.destroy();
      refused++;
      // One line per minute at most: an attacker must not be able to flood the log either.
      if (Date.now() - lastLog > 60_000) {
        log.warn(
          { client: addr, max, refused },
          "connection refused: too many concurrent connections from one address (gateway.connections.maxPerAddress)",
        );
        lastLog = Date.now();
        refused = 0;
      }
      return;
    }
    open.set(addr, n);
    socket.once("close", () => {
      const left = (open.get(addr) ?? 1) - 1;
      if (left <= 0) open.delete(addr);
      else open.set(addr, left);
    });
  });
}

/** `::ffff:1.2.3.4` and `1.2.3.4` are the same client. */
function normalize(addr: string): string {
  return addr.startsWith("::ffff:") && isIP(addr.slice(7)) === 4 ? addr.slice(7) : addr;
}
