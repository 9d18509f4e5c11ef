/**
 * `node --import tsx scripts/redis/ha.ts sentinel|cluster [--replicas N] [--aof no|everysec|always]`:
 * starts on loopback a primary + replicas + three sentinels, or a 3-primary Redis Cluster, with
 * the CE's ACL users (@ce/testing/redis-ha, the same code the HA tests use), prints the
 * `redis:` section of ce.yaml, the user passwords and every pid, and runs until SIGINT/SIGTERM;
 * then it stops each server by its pid and removes its directory.
 */
import { parseArgs } from "node:util";
import YAML from "yaml";
import { startRedisCluster, startSentinelSet, type RedisProc } from "@ce/testing/redis-ha";

const { values, positionals } = parseArgs({ allowPositionals: true, options: { replicas: { type: "string" }, aof: { type: "string" } } });
const kind = positionals[0];
const aof = (values.aof ?? "everysec") as "no" | "everysec" | "always";
if (kind !== "sentinel" && kind !== "cluster") {
  console.error("usage: scripts/redis/ha.ts sentinel|cluster [--replicas N] [--aof no|everysec|always]");
  process.exit(2);
}
const set =
  kind === "sentinel"
    ? await startSentinelSet({ durability: aof, replicas: Number(values.replicas ?? 1) })
    : await startRedisCluster({ durability: aof });
const procs: RedisProc[] = "sentinels" in set ? [...set.servers, ...set.sentinels] : set.nodes;
console.log(YAML.stringify({ redis: set.ceConfig() }));
console.log(
  `# passwords (write each to redis.users.<app>.passwordFile, mode 0600): gateway=${set.users.gateway.password} jem=${set.users.jem.password}`,
);
console.log(`# pids: ${procs.map((p) => `${p.port}=${p.pid}`).join(" ")}`);
console.log("# running; Ctrl-C stops every server");
for (const sig of ["SIGINT", "SIGTERM"] as const) {
  process.on(sig, () => {
    void set.stop().then(() => process.exit(0));
  });
}
