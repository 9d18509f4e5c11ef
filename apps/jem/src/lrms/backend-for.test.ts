import { describe, expect, it } from "vitest";
import { backendFor } from "./index.js";
import type { Backend } from "./types.js";

const b = (name: string) => ({ name }) as unknown as Backend;

describe("backendFor: one rule for submit, poll, cancel", () => {
  it("the named back end; the only one as a fallback; never a guess among several", () => {
    const fork = b("fork");
    const slurm = b("slurm");
    expect(
      backendFor(
        new Map([
          ["fork", fork],
          ["slurm", slurm],
        ]),
        "slurm",
      ),
    ).toBe(slurm);
    expect(
      backendFor(
        new Map([
          ["fork", fork],
          ["slurm", slurm],
        ]),
        "pbs",
      ),
    ).toBeUndefined();
    expect(backendFor(new Map([["fork", fork]]), "renamed")).toBe(fork);
    expect(backendFor(new Map(), "fork")).toBeUndefined();
  });
});
