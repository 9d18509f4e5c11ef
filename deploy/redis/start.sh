#!/bin/sh
# Entrypoint of the stack's Redis (deploy/compose.yaml): writes the aclfile from the password
# secrets, then runs the image's own entrypoint (which drops to the redis user). The aclfile holds
# SHA-256 hashes only and disables `default`, so a client without a CE password gets NOAUTH.
#   REDIS_ACL_USERS  "user:/run/secrets/file ..." (one entry per CE user)
#   REDIS_ACL_RULES  the CE users' rules (keys/channels under the CE prefix; redisAclRules() in
#                    packages/config/src/redis.ts; deploy/validate.sh checks they agree)
set -eu
dir=/run/ce-redis
acl=$dir/users.acl
mkdir -p "$dir"
umask 077
# `default` stays off (no login) but holds the CE rules: Redis 7.0 replays the AOF's MULTI/EXEC
# blocks as `default`, and without rights drops them (NOPERM) — a restart would lose job records.
echo "user default off $REDIS_ACL_RULES" > "$acl"
for entry in $REDIS_ACL_USERS; do
  user=${entry%%:*}
  file=${entry#*:}
  [ -s "$file" ] || { echo "redis: password file $file of user $user is missing or empty" >&2; exit 1; }
  # Same normalisation as the CE's reader (surrounding whitespace dropped); passwords are base64.
  hash=$(tr -d '[:space:]' < "$file" | sha256sum | cut -d' ' -f1)
  echo "user $user on #$hash $REDIS_ACL_RULES" >> "$acl"
done
chown -R redis:redis "$dir"
exec docker-entrypoint.sh "$@"
