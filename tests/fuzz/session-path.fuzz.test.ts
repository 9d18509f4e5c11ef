/**
 * Session paths (E6) and the routing path: random request targets built from dot segments, `//`,
 * %-encodings (of dots, slashes, NUL, overlong UTF-8), backslashes and raw bytes. Property: the
 * designed 400 BAD_PATH, or segments that stay inside the session (no `.`/`..`/empty component, no
 * separator or NUL inside one, ≤ 255 bytes each) whose resolution under the root is the root or below.
 */
import { posix } from "node:path";
import { describe, expect, it } from "vitest";
import { routingPath } from "../../apps/gateway/src/app.js";
import { CeError } from "../../apps/gateway/src/errors.js";
import { parseSessionPath } from "../../apps/gateway/src/services/session/path.js";
import { fc, fuzz } from "@ce/testing/fuzz";
import { breathe, rawText } from "./arbitraries.js";

const ROOT = "/arex/rest/1.1/jobs/0b7e2c1a-9f3d-4e2b-8c1d-2a3b4c5d6e7f/session";

const piece = fc.oneof(
  fc.constantFrom(
    "..",
    ".",
    "",
    "%2e%2e",
    "%2E.",
    ".%2e",
    "%2e",
    "...",
    "..%00",
    "%00",
    "%2f",
    "%2F",
    "%5c",
    "\\",
    "..\\..",
    "%c0%ae%c0%ae",
    "%c0%af",
    "%e0%80%ae",
    "%ff",
    "%",
    "%2",
    "%zz",
    "a%20b",
    "%25",
    "%252e%252e",
    "~",
    "..;",
    ";",
    "?",
    "#",
    "\u0000",
    "é",
    "%C3%A9",
    "x".repeat(256),
    "%41",
    "jobs",
    "session",
  ),
  fc.stringMatching(/^[A-Za-z0-9._~-]{1,12}$/),
  fc.string({ unit: "binary", maxLength: 6 }),
  fc.uint8Array({ minLength: 1, maxLength: 4 }).map((b) => [...b].map((x) => `%${x.toString(16).padStart(2, "0")}`).join("")),
);
const rel = fc
  .array(piece, { maxLength: 10 })
  .chain((ps) =>
    fc
      .array(fc.constantFrom("/", "//", "/./", "/../"), { minLength: ps.length, maxLength: ps.length })
      .map((seps) => ps.map((p, i) => seps[i] + p).join("")),
  );
/** Mostly under the session root, sometimes reaching it through another job's route or dot segments. */
const target = fc.oneof(
  { arbitrary: rel.map((r) => ROOT + r), weight: 6 },
  { arbitrary: rel.map((r) => `/arex/rest/1.1/jobs/other/session/../../0b7e2c1a-9f3d-4e2b-8c1d-2a3b4c5d6e7f/session${r}`), weight: 1 },
  { arbitrary: rel.map((r) => ROOT.replace("/session", "/%73ession") + r), weight: 1 },
  { arbitrary: rawText.map((t) => ROOT + "/" + t), weight: 2 },
);

const FORBIDDEN = /[\0/]/;

describe("fuzz: session paths", () => {
  it("BAD_PATH or segments that resolve inside the session", async () => {
    await fuzz("session-path", target, async (raw) => {
      await breathe();
      let p;
      try {
        p = parseSessionPath(raw, ROOT);
      } catch (e) {
        if (!(e instanceof CeError) || e.status !== 400 || e.code !== "BAD_PATH" || !e.message.startsWith("Invalid session path: "))
          throw e;
        return;
      }
      for (const s of p.segments) {
        expect(s === "" || s === "." || s === ".." || FORBIDDEN.test(s), JSON.stringify(s)).toBe(false);
        expect(Buffer.byteLength(s)).toBeLessThanOrEqual(255);
      }
      const resolved = posix.resolve("/session", ...p.segments);
      expect(resolved === "/session" || resolved.startsWith("/session/")).toBe(true);
      expect(p.normalized).toBe(`/${p.segments.join("/")}`);
      expect(p.requestHref.startsWith(ROOT)).toBe(true);
    });
  });

  it("routingPath: one slash per separator, no trailing slash, never the query", async () => {
    const url = fc
      .tuple(
        target,
        fc.oneof(
          fc.constant(""),
          rawText.map((q) => `?${q}`),
        ),
      )
      .map(([p, q]) => `https://localhost:8443${p}${q}`);
    await fuzz("routing-path", url, async (u) => {
      await breathe();
      let req: Request;
      try {
        req = new Request(u);
      } catch {
        return; // not a URL any client could send
      }
      const path = routingPath(req);
      expect(path.startsWith("/")).toBe(true);
      expect(path).not.toMatch(/\/\/|[?#]/);
      if (path.length > 1) expect(path.endsWith("/")).toBe(false);
      // Dot segments were resolved by the URL parser: routing never sees one.
      expect(path.split("/")).not.toContain("..");
    });
  });
});
