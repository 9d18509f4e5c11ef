import { describe, expect, it } from "vitest";
import { describeEnd, isSignalEnd, signalOf } from "./verdict.js";

describe("failure texts a user can read (reasons in words)", () => {
  it("a plain non-zero exit says the executable's code and is the user's", () => {
    expect(describeEnd(3, "")).toEqual({ text: "LRMS error: (3) The executable exited with code 3", cause: "user" });
  });

  it("codes above 128 (shell) and 256 (A-REX scans) name the signal", () => {
    expect(signalOf(137)).toBe(9);
    expect(signalOf(271)).toBe(15);
    expect(signalOf(128)).toBeUndefined();
    expect(describeEnd(137, "").text).toMatch(
      /^LRMS error: \(137\) Job was killed by SIGKILL \(exit code 137 = 128 \+ 9\): killed at once/,
    );
    expect(describeEnd(271, "").text).toMatch(
      /^LRMS error: \(271\) Job was killed by SIGTERM \(exit code 271 = 256 \+ 15\): asked to stop/,
    );
    expect(describeEnd(137, "").cause).toBe("internal");
  });

  it("137 and 143 are explained in words, also when the wrapper said only 'terminated by'", () => {
    expect(describeEnd(143, "Job was terminated by SIGTERM").text).toBe(
      "LRMS error: (143) Job was killed by SIGTERM (exit code 143 = 128 + 15): asked to stop: by the batch system at a limit or on a cancel, or by the node shutting down",
    );
    expect(describeEnd(137, "Job was terminated by SIGKILL").text).toContain("ran out of memory");
  });

  it("a memory kill names the memory used and asked for (what the next request needs)", () => {
    const msg = "Memory exceeded: the job used more memory than it asked for (Slurm OUT_OF_MEMORY)";
    expect(describeEnd(137, msg, { usedMemoryMB: 69.4, requestedMemoryMB: 64 })).toEqual({
      text: `LRMS error: (137) ${msg}; it used 69 MB and asked for 64 MB`,
      cause: "user",
    });
    expect(describeEnd(137, msg, { requestedMemoryMB: 64 }).text).toBe(`LRMS error: (137) ${msg}; it asked for 64 MB`);
    expect(describeEnd(137, msg).text).toBe(`LRMS error: (137) ${msg}`);
  });

  it("SIGXCPU is the CPU time limit the job asked for", () => {
    expect(describeEnd(152, "Job was terminated by SIGXCPU")).toEqual({
      text: "LRMS error: (152) CPU time exceeded: the job used all the CPU time it asked for (SIGXCPU)",
      cause: "user",
    });
    expect(describeEnd(152, "").cause).toBe("user");
  });

  it("a missing executable or stdin is the user's mistake, not the site's", () => {
    expect(describeEnd(127, "Executable ./run.sh not found")).toEqual({
      text: "LRMS error: (127) Executable ./run.sh not found",
      cause: "user",
    });
    expect(describeEnd(1, "Standard input file in.txt not found").cause).toBe("user");
  });

  it("a failing pre- or post-executable is the user's, named with its code", () => {
    expect(describeEnd(3, "Pre-executable 2 (./setup.sh) exited with code 3, expected 0")).toEqual({
      text: "LRMS error: (3) Pre-executable 2 (./setup.sh) exited with code 3, expected 0",
      cause: "user",
    });
    expect(describeEnd(127, "Post-executable 1 ($HOME/x) not found").cause).toBe("user");
  });

  it("limits exceeded are the user's; node failures, preemption and an administrator's cancel are the site's", () => {
    expect(describeEnd(271, "Walltime exceeded: the batch system ended the job at its time limit (Slurm TIMEOUT)").cause).toBe("user");
    expect(describeEnd(-1, "Memory exceeded: the job used more memory than it asked for (Slurm OUT_OF_MEMORY)").cause).toBe("user");
    expect(describeEnd(-1, "Node failure: the node running the job failed (Slurm NODE_FAIL)").cause).toBe("internal");
    expect(describeEnd(271, "Cancelled in the batch system by an administrator (Slurm CANCELLED)").cause).toBe("internal");
    expect(describeEnd(1, "Runtime environment ENV/X failed in stage 1").cause).toBe("internal");
  });

  it("an end without an exit code says so", () => {
    expect(describeEnd(-1, "")).toEqual({
      text: "LRMS error: (-1) Job ended for an unknown reason (no exit code from the batch system)",
      cause: "internal",
    });
  });

  it("signal ends are recognised from the code or the wrapper's words", () => {
    expect(isSignalEnd(143, "")).toBe(true);
    expect(isSignalEnd(0, "Job was terminated by SIGTERM")).toBe(true);
    expect(isSignalEnd(3, "")).toBe(false);
  });
});
