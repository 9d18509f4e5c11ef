import type { Queue } from "bullmq";
import type { JobStore } from "./jobs.js";
import { enqueueCommands, type QueueCatalog } from "./queues.js";

type Command = QueueCatalog["commands"];

/**
 * What a 202 for kill/clean/restart promises: the request is on the job record (and in the
 * open-request set) BEFORE the doorbell rings and before the caller answers. If the queue later
 * drops the message, the JEM's recovery pass still finds the flag. A kill of a job that already
 * ended records nothing and rings nothing. Any failure throws: the caller must not answer 202.
 */
export async function requestCommands(jobs: JobStore, queue: Queue<Command>, cmds: readonly Command[]): Promise<Command[]> {
  const recorded = await jobs.request(cmds);
  const ring = cmds.filter((_, i) => recorded[i]);
  await enqueueCommands(queue, ring);
  return ring;
}
