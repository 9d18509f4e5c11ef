import type { JobRecord } from "@ce/store";
import type { JemContext } from "../context.js";

/**
 * Outcome of one state handler pass: `again` = the job moved, run the next state's handler now
 * (A-REX "reprocess immediately"); `wait` = nothing to do until an event, or until `at` (ms).
 */
export type Step = { again: true } | { again: false; at?: number | undefined };
export type StateHandler = (ctx: JemContext, job: JobRecord) => Promise<Step>;

export const AGAIN: Step = { again: true };
export const WAIT: Step = { again: false };
export const waitUntil = (at: number): Step => ({ again: false, at });
/** A lost CAS: the job changed under us; transition() has rung it for another look. */
export const moved = (r: JobRecord | undefined): Step => (r ? AGAIN : WAIT);
