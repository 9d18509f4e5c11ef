import { execFileSync, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { chromium, type Browser } from "playwright-core";

const ROOT = resolve(import.meta.dirname, "../..");
export const CHROMIUM = "/usr/bin/chromium";

export interface RemoteBrowser {
  browser: Browser;
  close(): Promise<void>;
}

/**
 * Starts browser-server-main.ts in its own Node process and connects to it. `caFile` is given to
 * that process as NODE_EXTRA_CA_CERTS; without it the CE's certificate is not trusted.
 */
export async function launchBrowser(opts: { caFile?: string } = {}): Promise<RemoteBrowser> {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing`);
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env.NODE_EXTRA_CA_CERTS;
  if (opts.caFile) env.NODE_EXTRA_CA_CERTS = opts.caFile;
  const child = spawn("node", ["--import", "tsx", "tests/browser/browser-server-main.ts"], {
    cwd: ROOT,
    env,
    stdio: ["pipe", "pipe", "pipe"],
  });
  let out = "";
  let err = "";
  child.stderr.on("data", (d) => (err += String(d)));
  const ws = await new Promise<string>((res, rej) => {
    const t = setTimeout(() => rej(new Error(`browser server did not start:\n${err}`)), 60_000);
    child.stdout.on("data", (d) => {
      out += String(d);
      const m = /^WS (\S+)$/m.exec(out);
      if (m) {
        clearTimeout(t);
        res(m[1]!);
      }
    });
    child.once("exit", (code) => {
      clearTimeout(t);
      rej(new Error(`browser server exited (${code}):\n${err}`));
    });
  });
  const browser = await chromium.connect(ws);
  return {
    browser,
    async close() {
      await browser.close().catch(() => undefined);
      if (child.exitCode !== null || child.signalCode) return;
      await new Promise<void>((res) => {
        const t = setTimeout(() => child.kill("SIGKILL"), 10_000);
        child.once("exit", () => (clearTimeout(t), res()));
        child.stdin.end();
      });
    },
  };
}

/**
 * True when Chromium is there, installing it first (scripts/ensure-system-deps.sh browser, as CI
 * does) when it is not; false only if it is absent and could not be installed.
 */
export function ensureChromium(): boolean {
  if (existsSync(CHROMIUM)) return true;
  try {
    // Never wait for a sudo password: only root or password-less sudo can install.
    if (process.getuid?.() !== 0) execFileSync("sudo", ["-n", "true"], { stdio: "ignore", timeout: 10_000 });
    execFileSync("bash", ["scripts/ensure-system-deps.sh", "browser"], { cwd: ROOT, stdio: "ignore", timeout: 900_000 });
  } catch {
    // Reported by the caller as a skip.
  }
  return existsSync(CHROMIUM);
}
