import { describe, expect, it } from "vitest";
import { jobListDoc, render } from "@ce/glue2";
import { renderJobList, streamJobList } from "./joblist.js";

describe("renderJobList", () => {
  const cases = [
    [],
    [{ id: "a" }],
    [{ id: "a" }, { id: 'b<&>"é' }],
    [
      { id: "x", state: "RUNNING" },
      { id: "y", state: "QUEUING" },
    ],
  ];
  it.each(cases.map((c) => [c]))("matches the element-tree rendering for %j", (items) => {
    for (const fmt of ["json", "xml"] as const) expect(renderJobList(items, fmt)).toBe(render(jobListDoc(items), fmt));
  });
});

describe("streamJobList", () => {
  const read = async (body: ReadableStream<Uint8Array>) => {
    const chunks: Uint8Array[] = [];
    for await (const c of body) chunks.push(c);
    return { chunks: chunks.length, bytes: Buffer.concat(chunks) };
  };
  const many = (n: number, state?: string) =>
    Array.from({ length: n }, (_, i) => ({ id: i % 7 === 0 ? `j${i}<&>"é\\` : `${i}-3f1c`, ...(state ? { state } : {}) }));
  const cases = [[], [{ id: "a" }], many(999), many(1000), many(1001, "RUNNING"), many(2500)];
  it.each(cases.map((c) => [c.length, c]))("gives renderJobList's bytes and their exact length (%i jobs)", async (_n, items) => {
    for (const fmt of ["json", "xml"] as const) {
      const whole = Buffer.from(renderJobList(items, fmt));
      const { length, body } = streamJobList(items, fmt);
      const { chunks, bytes } = await read(body);
      expect(bytes.equals(whole)).toBe(true);
      expect(length).toBe(whole.byteLength);
      expect(chunks).toBe(Math.max(1, Math.ceil(items.length / 1000)));
    }
  });
});
