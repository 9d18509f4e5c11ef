#!/usr/bin/env bash
# `pnpm start`: the embedded development CE — local Redis (ACL users gateway/jem with passwords in
# .ce/secrets, `default` off; data under .ce/redis), the JEM with the fork back end, one gateway on
# https://localhost:8443/arex (by default).
# Development certificates and .ce/ce.yaml are generated on first start. Ctrl-C stops what it started.
set -euo pipefail
cd "$(dirname "$0")/.."
STATE="${CE_STATE_DIR:-$PWD/.ce}"
bash scripts/ensure-system-deps.sh base
node --import tsx scripts/dev/setup.ts "$STATE" >/dev/null
export CE_CONFIG="${CE_CONFIG:-$STATE/ce.yaml}"
# Ports and URLs come from the configuration (file + CE__* overrides), like everything else.
read -r URL ADMIN_PORT JEM_PORT MAPPED < <(node --import tsx -e 'import("@ce/config").then(({loadConfig})=>{const c=loadConfig();const m=c.mapping?[...new Set(c.mapping.rules.map((r)=>r.user??(r.pool?"pool":"gridmap")))].join(","):"-";console.log(c.endpoint.url, c.admin.port, c.admin.jemPort, m)})')
if [[ "$MAPPED" == - ]]; then
  echo "ce: mapping is off: jobs run as $(id -un), the CE's own account (developer-only mode; run as root or configure \`mapping\` for isolation)"
else
  echo "ce: mapping is on: jobs run as the mapped local account ($MAPPED), never as the CE ($(id -un))"
fi
# The aclfile from the prefix and the password files (refused when group/other-readable).
read -r REDIS_PORT REDIS_ACL REDIS_USER REDIS_PWFILE < <(node --import tsx scripts/dev/redis-acl.ts) || { echo "ce: cannot prepare the Redis ACL (above)" >&2; exit 1; }

pids=()
cleanup() {
  trap - INT TERM EXIT
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [ -f "$STATE/redis/redis.pid" ] && [ "${STARTED_REDIS:-0}" = 1 ]; then kill "$(cat "$STATE/redis/redis.pid")" 2>/dev/null || true; fi
}
trap cleanup INT TERM EXIT

# The password goes through the environment (REDISCLI_AUTH), never redis-cli's argv (visible in ps).
as_jem() { REDISCLI_AUTH="$(cat "$REDIS_PWFILE")" redis-cli --user "$REDIS_USER" -h 127.0.0.1 -p "$REDIS_PORT" "$@" 2>/dev/null; }
anon=$(redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping 2>&1 || true)
if [[ "$anon" == PONG || "$anon" == *NOAUTH* || "$anon" == *WRONGPASS* ]]; then
  # Something answers: reuse it only when it is ours (our jem password works, no anonymous access).
  if [[ "$anon" != PONG && "$(as_jem ping)" == PONG ]]; then
    echo "ce: reusing the CE's Redis already answering on 127.0.0.1:$REDIS_PORT (ACL users, no anonymous access)"
  else
    echo "ce: 127.0.0.1:$REDIS_PORT is answered by a Redis without the CE's ACL users$([[ "$anon" == PONG ]] && echo " (it accepts anyone without a password)")." >&2
    echo "ce: stop it, or run the CE's own Redis on another port: CE__REDIS__URL=redis://127.0.0.1:6380 ./ce start" >&2
    exit 1
  fi
else
  redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --protected-mode yes --aclfile "$REDIS_ACL" --dir "$STATE/redis" --appendonly yes \
    --hash-max-listpack-value 512 --hash-max-listpack-entries 128 --daemonize yes --pidfile "$STATE/redis/redis.pid" --logfile "$STATE/logs/redis.log"
  STARTED_REDIS=1
  for _ in $(seq 50); do [[ "$(as_jem ping)" == PONG ]] && break; sleep 0.1; done
  echo "ce: started redis-server on 127.0.0.1:$REDIS_PORT (data in $STATE/redis; ACL users gateway, jem; passwords in $STATE/secrets/)"
fi

node --import tsx apps/jem/src/main.ts >>"$STATE/logs/jem.log" 2>&1 & pids+=($!)
# The gateway runs from its build (the deployed form); rebuilt when a source is newer.
if [ ! -f apps/gateway/dist/main.js ] || [ -n "$(find apps/gateway/src packages/*/src -name '*.ts' -newer apps/gateway/dist/main.js -print -quit)" ]; then
  node --import tsx scripts/build-app.ts gateway >/dev/null
fi
node --max-old-space-size=256 apps/gateway/dist/main.js >>"$STATE/logs/gateway.log" 2>&1 & pids+=($!)

PKI="$STATE/pki"
for _ in $(seq 100); do
  curl -s -o /dev/null --cacert "$PKI/ca/ca.pem" "$URL/rest" && break
  for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null || { echo "ce: a component exited; see $STATE/logs/" >&2; tail -n 20 "$STATE/logs/"*.log >&2; exit 1; }; done
  sleep 0.2
done
cat <<MSG

  CE running: $URL   (logs: $STATE/logs/, config: $CE_CONFIG)
  Admin: http://127.0.0.1:$ADMIN_PORT (gateway), http://127.0.0.1:$JEM_PORT/queues (JEM queues)
         token: $(cat "$STATE/secrets/admin.token")

  ARC client:
    export X509_USER_CERT=$PKI/user/cert.pem X509_USER_KEY=$PKI/user/key.pem
    export X509_CERT_DIR=$PKI/ca X509_USER_PROXY=$PKI/user/proxy.pem
    arcinfo -c $URL
    arcsub -C $URL -T arcrest myjob.xrsl ; arcstat -a ; arcget -a

  curl:
    curl --cacert $PKI/ca/ca.pem --cert $PKI/user/cert.pem --key $PKI/user/key.pem \\
         -H 'Accept: application/json' $URL/rest/1.1/jobs

  Browser: import $PKI/user/user.p12 (password: ce-dev) and trust $PKI/ca/ca.pem,
           then open $URL/rest/1.1/jobs

  Ctrl-C stops the CE.
MSG
wait -n "${pids[@]}"
