import type { JobRecord } from "@ce/store";
import type { JemContext } from "../context.js";

/**
 * Outcome of one state handler pass: `again` = the job moved, run the next state's handler now
 * (A-REX "reprocess immediately"); `wait` = nothing to do until an event, or until `at` (ms).
 */
export type Step = { again: true; job?: JobRecord | undefined } | { again: false; at?: number | undefined };
export type StateHandler = (ctx: JemContext, job: JobRecord) => Promise<Step>;

export const AGAIN: Step = { again: true };
export const WAIT: Step = { again: false };
export const waitUntil = (at: number): Step => ({ again: false, at });
/**
 * After a transition: the new record (the CAS made it exactly that) goes to the next handler
 * without a second read; undefined = a lost CAS, transition() has rung the job for another look.
 * A command landing in between rings the job too, so the next look sees it.
 */
export const moved = (r: JobRecord | undefined): Step => (r ? { again: true, job: r } : WAIT);
