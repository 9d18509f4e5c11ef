import { describe, expect, it } from "vitest";
import { bytesInWords, failureWords, secondsInWords, stateInWords } from "./words.js";

describe("failure texts for people (pages, ceadm)", () => {
  it("drops A-REX's `LRMS error: (N)` prefix: the cause comes first, in words", () => {
    expect(failureWords("LRMS error: (3) The executable exited with code 3")).toEqual({
      cause: "The executable exited with code 3",
      advice: "The program itself reported the failure: its standard error usually says why.",
    });
    expect(failureWords("LRMS error: (-1) Node failure: the node running the job failed (Slurm NODE_FAIL)").cause).toBe(
      "Node failure: the node running the job failed (Slurm NODE_FAIL)",
    );
  });

  it("a memory kill without figures gets them from the record and the description, and a next request", () => {
    const w = failureWords("LRMS error: (137) Memory exceeded: the job used more memory than it asked for", {
      usedMemoryMB: 69,
      requestedMemoryMB: 64,
    });
    expect(w.cause).toBe("Memory exceeded: the job used more memory than it asked for; it used 69 MB and asked for 64 MB");
    expect(w.advice).toBe("Ask for more memory, for example 128 MB: (memory=128) in xRSL, <IndividualPhysicalMemory> (bytes) in ADL.");
    // The JEM's newer texts carry them already: not twice.
    const twice = failureWords("LRMS error: (137) Memory exceeded: the job used more than its limit of 64 MB; it used 69 MB", {
      usedMemoryMB: 69,
      requestedMemoryMB: 64,
    });
    expect(twice.cause.match(/69 MB/g)).toHaveLength(1);
  });

  it("limits, staging and site failures each say what to do", () => {
    expect(failureWords("LRMS error: (271) Walltime exceeded: …").advice).toMatch(/\(walltime=/);
    expect(failureWords("Failed in data staging: https://x/y: 403 Forbidden").advice).toMatch(/URL was refused/);
    expect(failureWords("User file: in.dat - Timeout waiting for upload").advice).toMatch(/upload/);
    expect(failureWords("LRMS error: (-1) Preempted: the batch system stopped the job").advice).toMatch(/not caused by the job/);
    expect(failureWords("Job is canceled by external request")).toEqual({ cause: "The job was killed on request" });
    expect(failureWords("").cause).toMatch(/no reason/);
  });
});

describe("states and figures for people", () => {
  it("internal state names in words; FINISHED says how it ended", () => {
    expect(stateInWords("PENDING:PREPARING")).toBe("waiting (fetching inputs)");
    expect(stateInWords("INLRMS")).toBe("in the batch system");
    expect(stateInWords("FINISHED", "Job failed")).toBe("failed");
    expect(stateInWords("FINISHED", "Job was killed")).toBe("killed");
    expect(stateInWords("FINISHED", "Stage-out finished.")).toBe("finished");
    expect(stateInWords("<b>odd</b>")).toBe("<b>odd</b>");
  });

  it("no float noise: 0.06999999999999999 s reads 0.07 s", () => {
    expect(secondsInWords(0.06999999999999999)).toBe("0.07 s");
    expect(secondsInWords(12.4)).toBe("12 s");
    expect(secondsInWords(200)).toBe("3 min 20 s");
    expect(secondsInWords(7500)).toBe("2 h 5 min");
    expect(bytesInWords(512)).toBe("512 B");
    expect(bytesInWords(1536)).toBe("1.5 KiB");
    expect(bytesInWords(5 * 1024 ** 3)).toBe("5.0 GiB");
  });
});
