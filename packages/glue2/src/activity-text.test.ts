import { describe, expect, it } from "vitest";
import { buildActivityDocument, type ActivityInput } from "./activity.js";
import { activityJson, activityXml } from "./activity-text.js";
import { bulkResultsDoc } from "./documents.js";
import { render } from "./negotiate.js";
import { renderJsonValue } from "./render/json.js";
import { renderXml } from "./render/xml.js";

// Deterministic pseudo-random inputs: the direct texts must equal the tree's for any input.
let seed = 12345;
const rnd = () => (seed = (seed * 48271) % 2147483647) / 2147483647;
const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)]!;
const maybe = <T>(v: T): T | undefined => (rnd() < 0.4 ? undefined : v);

const PIECES = [
  "job",
  "tëst",
  "<b>",
  "a&b",
  '"q"',
  "'",
  "\t",
  "\n",
  "\r\n",
  "\r",
  "x\u0001y",
  "\uD800",
  "😀",
  "",
  " ",
  "\\",
  "]]>",
  "é",
  "\u2028",
  "\uFFFE",
  "a/b=c",
];
const text = () => {
  let s = "";
  const n = Math.floor(rnd() * 4);
  for (let i = 0; i < n; i++) s += pick(PIECES);
  return s;
};
const texts = () => {
  const out: string[] = [];
  const n = Math.floor(rnd() * 4);
  for (let i = 0; i < n; i++) out.push(text());
  return out;
};
const num = () => pick([0, 1, -3, 2.5, 600.4, 1e21, NaN, Infinity, -Infinity, 12345678]);
const date = () =>
  pick([
    new Date(Date.UTC(2026, 4, 1, 9, 0, 0, 999)),
    new Date(0),
    new Date(NaN),
    new Date(Date.UTC(10000, 0, 1)),
    new Date(-1),
    new Date(1795456997063),
  ]);
const STATES = ["nordugrid:FINISHED", "bes:Failed", "arcrest:FAILED", "emies:terminal", "arcrest:RUNNING", "", "nordugrid:INLRMS:R"];

function randomInput(): ActivityInput {
  const states = texts().concat(STATES.filter(() => rnd() < 0.5));
  if (!states.some((s) => s.startsWith("arcrest:"))) states.splice(Math.floor(rnd() * (states.length + 1)), 0, "arcrest:ACCEPTING");
  return {
    id: pick(["0b6c5d1e-1111-4222-8333-444455556666", "a&b<c>", "j"]),
    hostname: pick(["ce.example.org", "h<&>"]),
    now: pick([new Date(Date.UTC(2026, 4, 1, 10, 0, 0, 123)), new Date(1795456997063)]),
    validity: maybe(pick([60, 0, 3600])),
    name: maybe(text()),
    jobDescription: maybe(pick(["nordugrid:xrsl", "emies:adl", ""])),
    states,
    restartStates: maybe(texts()),
    localIdFromManager: maybe(text()),
    exitCode: maybe(num()),
    computingManagerExitCode: maybe(pick<string | number>(["1", 0, 3, "", "x<y"])),
    errors: maybe(
      pick<string | string[]>([text() + "\n" + text(), "Job failed\r\nexit code 1\n\n", texts(), "x".repeat(1100) + "\nlast", "  \n\t\n"]),
    ),
    waitingPosition: maybe(num()),
    owner: maybe(pick(["/DC=org/CN=User", "iss/sub", text()])),
    localOwner: maybe(text()),
    fqans: maybe(texts()),
    requestedTotalWallTime: maybe(num()),
    requestedTotalCpuTime: maybe(num()),
    requestedSlots: maybe(num()),
    requestedApplicationEnvironments: maybe(texts()),
    stdin: maybe(text()),
    stdout: maybe(text()),
    stderr: maybe(text()),
    logDir: maybe(text()),
    executionNodes: maybe(texts()),
    queue: maybe(pick(["main", "", "q&<"])),
    usedTotalWallTime: maybe(num()),
    usedTotalCpuTime: maybe(num()),
    usedMainMemory: maybe(num()),
    submissionTime: maybe(date()),
    computingManagerSubmissionTime: maybe(date()),
    startTime: maybe(date()),
    computingManagerEndTime: maybe(date()),
    endTime: maybe(date()),
    workingAreaEraseTime: maybe(date()),
    proxyExpirationTime: maybe(date()),
    submissionHost: maybe(text()),
    submissionClientName: maybe(text()),
    otherMessages: maybe(texts()),
    computingShareId: rnd() < 0.8 ? undefined : pick(["", "urn:share", "s&<"]),
    computingEndpointId: rnd() < 0.7 ? undefined : pick(["", "urn:ep", 'e"p']),
  };
}

describe("activityXml / activityJson", () => {
  it("equal the tree renderers' output for varied inputs (escaping, errors, missing fields, runs of one and many)", () => {
    for (let i = 0; i < 3000; i++) {
      const input = randomInput();
      const tree = buildActivityDocument(input);
      expect(activityXml(input)).toBe(renderXml(tree));
      expect(activityJson(input)).toBe(JSON.stringify(renderJsonValue(tree)));
    }
  });

  it("fit into the bulk info answer as the tree does (XML and JSON)", () => {
    const input = randomInput();
    const tree = buildActivityDocument(input);
    const xml = render(bulkResultsDoc([{ statusCode: 200, reason: "OK", id: "j", infoDocument: tree }]), "xml");
    expect(xml).toContain(`<info_document>${activityXml(input)}</info_document>`);
    const json = render(bulkResultsDoc([{ statusCode: 200, reason: "OK", id: "j", infoDocument: tree }]), "json");
    expect(json).toContain(`"info_document":{"ComputingActivity":${activityJson(input)}}`);
  });

  it("a minimal document: one State is a string in JSON, several an array", () => {
    const one = activityJson({ id: "j", hostname: "h", now: new Date(Date.UTC(2026, 4, 1, 10)), states: ["arcrest:ACCEPTING"] });
    expect(JSON.parse(one)).toEqual({
      ID: "urn:caid:h:org.nordugrid.arcrest:j",
      OtherInfo: "SubmittedVia=org.nordugrid.arcrest",
      Type: "single",
      IDFromEndpoint: "urn:idfe:j",
      State: "arcrest:ACCEPTING",
      _attributes: { BaseType: "Activity", CreationTime: "2026-05-01T10:00:00Z", Validity: "60" },
    });
    const two = JSON.parse(
      activityJson({ id: "j", hostname: "h", now: new Date(0), states: ["bes:Pending", "arcrest:ACCEPTING"], queue: "main" }),
    );
    expect(two.State).toEqual(["bes:Pending", "arcrest:ACCEPTING"]);
    expect(two.Associations).toEqual({ ComputingShareID: "urn:ogf:ComputingShare:h:main" });
  });

  it("require an arcrest: state, as the tree does", () => {
    const bad = { id: "j", hostname: "h", now: new Date(), states: ["bes:Running"] };
    expect(() => activityXml(bad)).toThrow(/arcrest:/);
    expect(() => activityJson(bad)).toThrow(/arcrest:/);
  });
});
