import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import type { ControlDir } from "./controldir.js";
import type { FsOp } from "./files.js";

/**
 * The capability of one batch job that runs on a node sharing no file system with the CE
 * (`lrms.sharedSession: false`, docs/operations.md "What the worker nodes share"): a random secret
 * the JEM puts in that job's batch script and nowhere else. Its bearer may read that job's session
 * files, write its outputs and its batch facts (diag, comment, lrms_done) through the gateway's
 * node route (apps/gateway/src/routes/node.ts), nothing else, and only while the batch job runs.
 * Only its SHA-256 is stored, in the job's control dir (`node.cap`, 0600, the CE's): a reader of
 * the control dir or a backup learns nothing it can present. It is bound to the job by where its
 * hash lives: a capability presented for another job id is compared with that job's hash and fails.
 */

/** Name of the hash file in the job's control dir. */
export const NODE_CAPABILITY_FILE = "node.cap";
const PREFIX = "cenode1_";
/** `cenode1_` + 43 base64url characters (32 random bytes). */
export const NODE_CAPABILITY_RE = /^cenode1_[A-Za-z0-9_-]{43}$/;

/** A fresh capability and the hash to store for it. */
export function newNodeCapability(): { token: string; hash: string } {
  const token = `${PREFIX}${randomBytes(32).toString("base64url")}`;
  return { token, hash: hashNodeCapability(token) };
}

export function hashNodeCapability(token: string): string {
  return createHash("sha256").update(token, "utf8").digest("hex");
}

/** Whether `token` is the capability whose hash is `stored` (constant time in the token's content). */
export function nodeCapabilityMatches(token: string, stored: string | undefined): boolean {
  if (stored === undefined || !NODE_CAPABILITY_RE.test(token)) return false;
  const want = Buffer.from(stored.trim(), "hex");
  const got = Buffer.from(hashNodeCapability(token), "hex");
  return want.length === got.length && timingSafeEqual(want, got);
}

/** The file-thread operation that stores a capability's hash for job `id` (replacing an earlier attempt's). */
export function storeNodeCapabilityOp(control: ControlDir, id: string, hash: string): FsOp {
  return ["write", `${control.jobDir(id)}/${NODE_CAPABILITY_FILE}`, `${hash}\n`, 0o600];
}

/** The file-thread operation that reads the stored hash of job `id` (null when there is none). */
export function readNodeCapabilityOp(control: ControlDir, id: string): readonly ["readSmall", string, number, boolean] {
  return ["readSmall", `${control.jobDir(id)}/${NODE_CAPABILITY_FILE}`, 256, false];
}
