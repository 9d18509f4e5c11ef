import { Failure } from "@ce/model";
import { lookup } from "node:dns/promises";
import { BlockList, isIP } from "node:net";
import { networkInterfaces } from "node:os";
import type { CompiledConfig } from "@ce/config";

/**
 * Where staging may connect (SSRF policy). A job names its storage URLs, and the JEM connects from
 * inside the site: by default, addresses that only make sense inside a host or site (loopback,
 * link-local, private, unique-local, ...) are refused, and so are the CE's own listeners and Redis
 * whatever `staging.allowNetworks` says. A site with internal storage opens exactly its networks
 * with `staging.allowNetworks`. The check is on the address the socket then connects to (the
 * name is resolved once, here), for every connection: redirects and stage-out included.
 */

/** A destination the policy refuses; not retried. Stable `code` for callers and logs. */
export class DestinationRefused extends Failure<"ERR_STAGING_DESTINATION_REFUSED"> {
  constructor(readonly reason: string) {
    super("ERR_STAGING_DESTINATION_REFUSED", reason);
  }
}

type Family = "ipv4" | "ipv6";

/** Special-purpose ranges refused unless allowed (RFC 6890 and successors), by the name a refusal gives. */
const RANGES: ReadonlyArray<readonly [string, ReadonlyArray<readonly [string, number, Family]>]> = [
  [
    "loopback",
    [
      ["127.0.0.0", 8, "ipv4"],
      ["::1", 128, "ipv6"],
    ],
  ],
  [
    "unspecified",
    [
      ["0.0.0.0", 8, "ipv4"],
      ["::", 128, "ipv6"],
    ],
  ],
  [
    "link-local",
    [
      ["169.254.0.0", 16, "ipv4"],
      ["fe80::", 10, "ipv6"],
    ],
  ],
  [
    "private",
    [
      ["10.0.0.0", 8, "ipv4"],
      ["172.16.0.0", 12, "ipv4"],
      ["192.168.0.0", 16, "ipv4"],
      ["192.0.0.0", 24, "ipv4"],
    ],
  ],
  ["shared address space (carrier-grade NAT)", [["100.64.0.0", 10, "ipv4"]]],
  ["benchmarking", [["198.18.0.0", 15, "ipv4"]]],
  ["unique-local", [["fc00::", 7, "ipv6"]]],
  ["site-local", [["fec0::", 10, "ipv6"]]],
  [
    "multicast",
    [
      ["224.0.0.0", 4, "ipv4"],
      ["ff00::", 8, "ipv6"],
    ],
  ],
  ["reserved", [["240.0.0.0", 4, "ipv4"]]],
];
const SPECIAL = RANGES.map(([name, nets]) => {
  const b = new BlockList();
  for (const [net, prefix, family] of nets) b.addSubnet(net, prefix, family);
  return [name, b] as const;
});

/** `a.b.c.d` for an IPv4-mapped (::ffff:a.b.c.d) or NAT64 (64:ff9b::a.b.c.d) IPv6 address: what it reaches. */
function embeddedV4(address: string): string | undefined {
  const m = /^(?:::ffff:|64:ff9b::)(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (m) return m[1];
  const h = /^(?:::ffff:|64:ff9b::)([0-9a-f]{1,4}):([0-9a-f]{1,4})$/i.exec(address);
  if (!h) return undefined;
  const hi = parseInt(h[1]!, 16);
  const lo = parseInt(h[2]!, 16);
  return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
}

/** A CIDR (`10.1.0.0/16`, `2001:db8::/32`, or one address) as BlockList arguments; undefined when malformed. */
export function parseCidr(text: string): { net: string; prefix: number; family: Family } | undefined {
  const [net = "", bits, extra] = text.trim().split("/");
  const v = isIP(net);
  if (v === 0 || extra !== undefined) return undefined;
  const max = v === 4 ? 32 : 128;
  const prefix = bits === undefined ? max : /^\d{1,3}$/.test(bits) ? Number(bits) : NaN;
  if (!(prefix >= 0 && prefix <= max)) return undefined;
  return { net, prefix, family: v === 4 ? "ipv4" : "ipv6" };
}

interface Listener {
  what: string;
  host: string;
  port: number;
}

function ownListeners(config: CompiledConfig): Listener[] {
  const out: Listener[] = [
    { what: "gateway", host: config.gateway.host, port: config.gateway.port },
    { what: "admin.port", host: config.admin.host, port: config.admin.port },
    { what: "admin.jemPort", host: config.admin.host, port: config.admin.jemPort },
  ];
  try {
    const u = new URL(config.redis.url);
    out.push({ what: "redis", host: u.hostname, port: Number(u.port || 6379) });
  } catch {
    // A malformed URL never reaches here (the JEM could not have connected to Redis).
  }
  for (const n of [...config.redis.sentinel.nodes, ...config.redis.cluster.nodes]) {
    const i = n.lastIndexOf(":");
    out.push({ what: "redis", host: n.slice(0, i), port: Number(n.slice(i + 1)) });
  }
  return out.filter((l) => l.port > 0).map((l) => ({ ...l, host: l.host.replace(/^\[|\]$/g, "") }));
}

export interface DestinationPolicy {
  /** The address to connect to for `host` (resolved once), or DestinationRefused naming the rule. */
  resolve(host: string, port: number): Promise<{ address: string; family: 4 | 6 }>;
}

export function destinationPolicy(config: CompiledConfig): DestinationPolicy {
  const allowed = new BlockList();
  for (const c of config.staging.allowNetworks) {
    const p = parseCidr(c);
    if (p) allowed.addSubnet(p.net, p.prefix, p.family);
  }
  const listeners = ownListeners(config);
  // Listener host names are resolved once, when first needed.
  let listenerAddrs: Promise<Array<Listener & { addrs: string[] | "any" }>> | undefined;
  const resolveListeners = () =>
    (listenerAddrs ??= Promise.all(
      listeners.map(async (l) => {
        if (l.host === "" || l.host === "0.0.0.0" || l.host === "::") return { ...l, addrs: "any" as const };
        if (isIP(l.host)) return { ...l, addrs: [l.host] };
        const found = await lookup(l.host, { all: true }).catch(() => []);
        return { ...l, addrs: found.map((a) => a.address) };
      }),
    ));

  const isLocal = (address: string) =>
    SPECIAL[0]![1].check(address, isIP(address) === 4 ? "ipv4" : "ipv6") ||
    Object.values(networkInterfaces()).some((list) => list?.some((i) => i.address === address));

  /** Why `address`:`port` is refused, or undefined. */
  const refusal = async (address: string, port: number): Promise<string | undefined> => {
    const v4 = isIP(address) === 6 ? embeddedV4(address) : undefined;
    const ip = v4 ?? address;
    const family: Family = isIP(ip) === 4 ? "ipv4" : "ipv6";
    for (const l of await resolveListeners()) {
      if (l.port !== port) continue;
      if (l.addrs === "any" ? isLocal(ip) : l.addrs.some((a) => a === ip || a === address))
        return `${ip}:${port} is this CE's own ${l.what} listener (never a staging destination)`;
    }
    if (allowed.check(ip, family) || (v4 !== undefined && allowed.check(address, "ipv6"))) return undefined;
    const hit = SPECIAL.find(([, b]) => b.check(ip, family));
    return hit ? `${ip} is ${hit[0]} (staging.allowNetworks does not include it)` : undefined;
  };

  return {
    async resolve(host, port) {
      const literal = host.replace(/^\[|\]$/g, "");
      const addrs = isIP(literal)
        ? [{ address: literal, family: isIP(literal) as 4 | 6 }]
        : await lookup(literal, { all: true, verbatim: true });
      let first: string | undefined;
      for (const a of addrs) {
        const why = await refusal(a.address, port);
        if (!why) return { address: a.address, family: a.family as 4 | 6 };
        first ??= why;
      }
      throw new DestinationRefused(addrs.length === 0 ? `${literal} has no address` : first!);
    },
  };
}
