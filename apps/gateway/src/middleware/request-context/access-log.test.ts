import pino from "pino";
import { afterEach, describe, expect, it, vi } from "vitest";
import { createLogger } from "@ce/ops";
import { accessLogWriter, lazyChild, type AccessFields } from "./access-log.js";

/** The service logger as the gateway makes it (bindings, redaction), writing into `out`. */
function serviceLogger(out: string[], level = "info") {
  return createLogger("gateway", level, {}, { write: (s: string) => void out.push(s) });
}

afterEach(() => vi.restoreAllMocks());

describe("access log line", () => {
  it("is byte for byte what a plain pino logger with the service bindings writes", () => {
    vi.spyOn(Date, "now").mockReturnValue(1_795_458_022_394);
    const odd = [
      'quote " and \\ backslash',
      "tab\there",
      "\u0001ctl",
      "é€😀 non-ASCII",
      "lone \ud800 surrogate",
      "x".repeat(101),
      `long "${"y".repeat(120)}\\`,
      "",
    ];
    const cases: AccessFields[] = [
      {
        reqId: "23e2c54e-fe3d-4e2e-850b-14c0744bc9bb",
        method: "POST",
        path: "/arex/rest/1.0/jobs",
        status: 201,
        ms: 2,
        subject: "/DC=org/DC=nordugrid/CN=Test User",
      },
      { reqId: "trace-42", method: "GET", path: "/arex/rest/1.0/jobs", status: 401, ms: 0, subject: undefined },
      { reqId: "r", method: "GET", path: "/x", status: 200, ms: Number.NaN },
      ...odd.map((s, i) => ({
        reqId: `r${i}`,
        method: "PUT",
        path: `/arex/rest/1.0/jobs/a/session/${s}`,
        status: 200 + i,
        ms: i,
        subject: s,
      })),
    ];
    const mine: string[] = [];
    const theirs: string[] = [];
    const write = accessLogWriter(serviceLogger(mine));
    const svc = serviceLogger(theirs);
    // The previous writer: a redaction-free sibling with the service logger's level and bindings.
    const sibling = pino({ level: svc.level, base: svc.bindings() }, { write: (s: string) => void theirs.push(s) });
    for (const f of cases) {
      write(f);
      sibling.info({ ...f }, "request");
    }
    expect(mine).toEqual(theirs);
    expect(JSON.parse(mine[0]!)).toMatchObject({ level: 30, svc: "gateway", reqId: cases[0]!.reqId, status: 201, msg: "request" });
  });
});

describe("lazy request logger", () => {
  it("makes no child until something is logged at an enabled level; then logs with the bindings", () => {
    const out: string[] = [];
    const parent = serviceLogger(out);
    const child = vi.spyOn(parent, "child");
    const log = lazyChild(parent, { reqId: "req-1" });
    expect(log.isLevelEnabled("info")).toBe(true);
    expect(log.isLevelEnabled("debug")).toBe(false);
    log.debug({ a: 1 }, "not logged");
    expect(child).not.toHaveBeenCalled();
    expect(out).toEqual([]);
    log.info({ a: 2 }, "logged");
    log.warn("again");
    expect(child).toHaveBeenCalledTimes(1);
    expect(out.map((l) => JSON.parse(l) as Record<string, unknown>)).toMatchObject([
      { svc: "gateway", reqId: "req-1", a: 2, msg: "logged", level: 30 },
      { reqId: "req-1", msg: "again", level: 40 },
    ]);
  });

  it("behaves as the child for everything else: nested children, bindings, level, redaction", () => {
    const out: string[] = [];
    const log = lazyChild(serviceLogger(out, "debug"), { reqId: "req-2" });
    log.child({ jobId: "j1" }).debug({ headers: { authorization: "Bearer secret" } }, "nested");
    expect(log.bindings()).toMatchObject({ reqId: "req-2" });
    expect(log.level).toBe("debug");
    log.level = "warn";
    log.info("dropped");
    expect(out).toHaveLength(1);
    const line = JSON.parse(out[0]!) as Record<string, unknown>;
    expect(line).toMatchObject({ reqId: "req-2", jobId: "j1", msg: "nested" });
    expect(out[0]).not.toContain("secret");
  });
});
