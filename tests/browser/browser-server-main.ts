/**
 * Child process: runs a Playwright browser server for headless Debian Chromium and prints its
 * WebSocket endpoint. It is a separate process so that NODE_EXTRA_CA_CERTS (read only at start-up)
 * makes Node trust the stack's dev CA: with `clientCertificates`, Playwright terminates the page's
 * TLS in this process and opens its own TLS connection (client certificate included) to the CE,
 * verifying the CE's certificate with Node's CA store. Exits when stdin closes or on SIGTERM.
 */
import { chromium } from "playwright-core";

const server = await chromium.launchServer({
  executablePath: process.env.CE_BROWSER_EXECUTABLE ?? "/usr/bin/chromium",
  headless: true,
  // Playwright gives every launch a fresh temporary --user-data-dir of its own.
  args: [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
  ],
});
process.stdout.write(`WS ${server.wsEndpoint()}\n`);

let closing = false;
const shutdown = async () => {
  if (closing) return;
  closing = true;
  await server.close().catch(() => undefined);
  process.exit(0);
};
process.stdin.on("end", shutdown);
process.stdin.on("close", shutdown);
process.stdin.resume();
process.on("SIGTERM", shutdown);
