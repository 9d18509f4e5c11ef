// `./ce start`, embedded Redis: writes <stateDir>/redis/users.acl from the configuration (prefix)
// and the ACL users' password files (mode 0600, created by setup.ts), and prints
// `<port> <aclfile> <jem user> <jem password file>` for start.sh. The aclfile holds SHA-256
// hashes only; `default` is off, so nothing talks to this Redis without a CE password.
import { chmodSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { loadConfig, redisAclFile, redisAuth, REDIS_ROLES } from "@ce/config";

const c = loadConfig();
const users = REDIS_ROLES.map((role) => {
  const auth = redisAuth(c.redis, role);
  if (!auth.username || !auth.password) throw new Error(`redis.users.${role}.passwordFile is not set (needed by the embedded Redis)`);
  return { username: auth.username, password: auth.password };
});
const acl = join(c.paths.stateDir, "redis", "users.acl");
writeFileSync(acl, redisAclFile(`${c.redis.prefix}*`, users), { mode: 0o600 });
chmodSync(acl, 0o600);
const port = new URL(c.redis.url).port || "6379";
process.stdout.write(`${port} ${acl} ${c.redis.users.jem.username} ${c.redis.users.jem.passwordFile}\n`);
