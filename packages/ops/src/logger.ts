import pino, { type Logger } from "pino";

/**
 * The one logger factory of both apps: structured pino lines with credentials redacted wherever a
 * field by these names ends up (headers, tokens, keys, proxies). Messages must never interpolate a
 * secret; fields are the only place one could slip in, and they are censored here.
 */
export const REDACT_PATHS = [
  "req.headers.authorization",
  'req.headers["x-token-delegation"]',
  'req.headers["x-delegation"]',
  "headers.authorization",
  'headers["x-token-delegation"]',
  'headers["x-delegation"]',
  "authorization",
  "token",
  "*.token",
  "accessToken",
  "*.accessToken",
  "password",
  "*.password",
  "privateKey",
  "*.privateKey",
  "privateKeyPem",
  "*.privateKeyPem",
  "keyPem",
  "*.keyPem",
  "proxyPem",
  "*.proxyPem",
  "encryptionKey",
  "*.encryptionKey",
  "adminToken",
  "*.adminToken",
];

export function createLogger(service: "gateway" | "jem" | "ceadm", level: string, base: Record<string, unknown> = {}): Logger {
  return pino({ level, base: { svc: service, ...base }, redact: { paths: REDACT_PATHS, censor: "[redacted]" } });
}
