/**
 * The local addresses a process listens on (TCP listeners and bound UDP sockets), from `ss -Hltunp`,
 * e.g. ["127.0.0.1:6379"]: suites assert with it that a server they start is on loopback only.
 */
import { execFileSync } from "node:child_process";

export function listeningAddresses(pid: number): string[] {
  const out = execFileSync("ss", ["-Hltunp"], { encoding: "utf8" });
  const addrs: string[] = [];
  for (const line of out.split("\n")) {
    // netid state recv-q send-q LOCAL PEER users:(("name",pid=N,fd=F),...)
    const f = line.trim().split(/\s+/);
    if (f.length >= 7 && new RegExp(`[(,]pid=${pid},`).test(f.slice(6).join(" "))) addrs.push(f[4]!);
  }
  return addrs;
}

/** True for an address ss prints as loopback: 127.0.0.0/8, ::1, IPv4-mapped 127.x. */
export const isLoopback = (addr: string): boolean => /^(127\.\d+\.\d+\.\d+|\[::1\]|\[::ffff:127\.\d+\.\d+\.\d+\]):\d+$/.test(addr);
