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
  // ioredis attaches the failed command to its errors: AUTH/HELLO carry the Redis password.
  "command.args",
  "*.command.args",
];

/**
 * Errors: the standard serializer, minus the command arguments ioredis hangs on ReplyErrors
 * (`AUTH <user> <password>`, or job data): only the command name is kept.
 */
function errSerializer(e: unknown): unknown {
  const out = pino.stdSerializers.err(e as Error) as unknown as Record<string, unknown>;
  const cmd = out.command as { name?: string } | undefined;
  if (cmd && typeof cmd === "object") out.command = { name: cmd.name };
  return out;
}

export function createLogger(
  service: "gateway" | "jem" | "ceadm",
  level: string,
  base: Record<string, unknown> = {},
  destination?: pino.DestinationStream,
): Logger {
  const options: pino.LoggerOptions = {
    level,
    base: { svc: service, ...base },
    redact: { paths: REDACT_PATHS, censor: "[redacted]" },
    serializers: { err: errSerializer, error: errSerializer },
  };
  return destination ? pino(options, destination) : pino(options);
}
