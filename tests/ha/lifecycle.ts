import { expect } from "vitest";
import type { Stack } from "@ce/testing/stack";
import { echoJobs, type CeClient } from "./client.js";

const DONE = ["FINISHED", "FAILED", "KILLED"];

/**
 * The core lifecycle against a running stack, whatever Redis it uses: an X.509 delegation, a
 * submission bound to it, bulk status, kill, restart of a failed job, clean. Throws (expect) on
 * the first deviation.
 */
export async function coreLifecycle(stack: Stack, ce: CeClient): Promise<void> {
  const deleg = await ce.delegate(stack);

  const sub = await ce.submit(echoJobs(4, "lifecycle"), `&delegation_id=${deleg}`);
  expect(sub.status).toBe(201);
  expect(sub.ids).toHaveLength(4);
  const sleeper = await ce.submit('&(executable="/bin/sleep")(arguments="300")(jobname="ha-sleep")');
  expect(sleeper.ids).toHaveLength(1);
  // Fails on its first run and succeeds on the second (the marker is an output file, so FINISHING keeps it in the session directory).
  const flaky = await ce.submit(
    '&(executable="/bin/sh")(arguments="-c" "if [ -e ran-once ]; then exit 0; fi; touch ran-once; exit 1")(outputfiles=("ran-once" ""))(rerun=1)(jobname="ha-rerun")',
  );
  expect(flaky.ids).toHaveLength(1);
  const all = [...sub.ids, ...sleeper.ids, ...flaky.ids];

  // Bulk status knows every acknowledged job.
  const first = await ce.states(all);
  expect([...first.keys()].sort()).toEqual([...all].sort());

  // The bound jobs report the delegation and finish.
  const d = await ce.bulk("delegations", sub.ids);
  expect(d.items.map((i) => [i.delegation_id].flat()[0])).toEqual(sub.ids.map(() => deleg));
  const finished = await ce.waitStates(sub.ids, DONE, 45_000, stack.logs);
  expect([...finished.values()]).toEqual(sub.ids.map(() => "FINISHED"));

  // Kill: 202, then KILLED.
  await ce.waitStates(sleeper.ids, ["RUNNING"], 30_000, stack.logs);
  const kill = await ce.bulk("kill", sleeper.ids);
  expect(kill.items[0]?.["status-code"]).toBe("202");
  expect((await ce.waitStates(sleeper.ids, DONE, 30_000, stack.logs)).get(sleeper.ids[0]!)).toBe("KILLED");

  // Restart: the job failed once, runs again and finishes.
  expect((await ce.waitStates(flaky.ids, DONE, 30_000, stack.logs)).get(flaky.ids[0]!)).toBe("FAILED");
  const restart = await ce.bulk("restart", flaky.ids);
  expect(restart.items[0]?.["status-code"]).toBe("202");
  expect((await ce.waitStates(flaky.ids, ["FINISHED"], 30_000, stack.logs)).get(flaky.ids[0]!)).toBe("FINISHED");

  // Clean: 202 for every job, then they are gone.
  const clean = await ce.bulk("clean", all);
  expect(clean.items.map((i) => i["status-code"])).toEqual(all.map(() => "202"));
  const end = Date.now() + 20_000;
  for (;;) {
    const s = await ce.bulk("status", all);
    if (s.items.every((i) => i["status-code"] === "404")) break;
    if (Date.now() > end) throw new Error(`cleaned jobs still there: ${s.body.slice(0, 300)}`);
    await new Promise((r) => setTimeout(r, 300));
  }
}
