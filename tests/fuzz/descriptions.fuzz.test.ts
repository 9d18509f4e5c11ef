/**
 * Fuzz targets for the job-description readers (xRSL, ADL) and the validator. Property: for any
 * input they return, or throw a DescriptionError (never anything else), within a bounded time,
 * and what they return stays within the expansion caps (limits.ts). Small caps are used so that
 * random bombs actually reach them.
 */
import { describe, it } from "vitest";
import {
  DescriptionError,
  InvalidDescriptionError,
  parseDescriptionsSettled,
  validateDescription,
  type DescriptionLimits,
  type JobDescription,
} from "@ce/model";
import { fc, fuzz } from "@ce/testing/fuzz";

const LIMITS: Partial<DescriptionLimits> = {
  maxDescriptions: 20,
  maxNodes: 5_000,
  maxListItems: 200,
  maxVariables: 50,
  maxSubstitutionDepth: 8,
  maxValueChars: 4_096,
  maxExpandedChars: 16_384,
  maxTotalExpandedChars: 65_536,
};
/** Per case; generous for a loaded CI machine, far below what a hang would take. */
const MAX_MS = 2_000;

/** Characters of every string a description holds: what consumers would write out. */
function chars(v: unknown): number {
  if (typeof v === "string") return v.length;
  if (Array.isArray(v)) return v.reduce((n: number, x) => n + chars(x), 0);
  if (v && typeof v === "object" && !(v instanceof Date)) return Object.entries(v).reduce((n, [k, x]) => n + k.length + chars(x), 0);
  return 0;
}

/**
 * Lets the event loop run now and then: a long synchronous stretch (100,000 cases under
 * `pnpm fuzz`) otherwise starves vitest's worker RPC until it times out.
 */
function yielding<T>(check: (v: T) => void): (v: T) => Promise<void> | void {
  let n = 0;
  return (v) => {
    check(v);
    if (++n % 500 === 0) return new Promise((resolve) => setImmediate(resolve));
  };
}

const checkBody = yielding(checkOne);

function checkOne(body: string): void {
  const t0 = performance.now();
  let total = 0;
  try {
    const items = parseDescriptionsSettled(body, { limits: LIMITS, maxBytes: 1024 * 1024 });
    if (items.length === 0 || items.length > LIMITS.maxDescriptions! + 1) throw new Error(`${items.length} items`);
    for (const it of items) {
      if (!it.ok) {
        if (!(it.error instanceof DescriptionError)) throw new Error(`item error of class ${String(it.error)}`);
        continue;
      }
      // Evaluated values are capped; the description also holds literal text copied from the body.
      const n = chars(it.description);
      if (n > LIMITS.maxExpandedChars! + body.length) throw new Error(`description holds ${n} characters`);
      total += n;
    }
  } catch (e) {
    if (!(e instanceof DescriptionError)) throw e;
  }
  if (total > LIMITS.maxTotalExpandedChars! + body.length * 2) throw new Error(`body expands to ${total} characters`);
  const ms = performance.now() - t0;
  if (ms > MAX_MS) throw new Error(`took ${Math.round(ms)} ms`);
}

// ---------------------------------------------------------------- xRSL
const word = fc.stringMatching(/^[A-Za-z0-9_./:-]{1,12}$/);
const ATTRS = [
  "executable",
  "arguments",
  "inputfiles",
  "outputfiles",
  "stdout",
  "walltime",
  "cputime",
  "lifetime",
  "gridtime",
  "count",
  "memory",
  "jobname",
  "environment",
  "runtimeenvironment",
  "rsl_substitution",
  "queue",
  "notify",
  "rerun",
];
const VARS = ["A", "B", "C", "D"];

const xrslValue = fc.letrec<{ value: string }>((tie) => ({
  value: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    word,
    word.map((w) => `"${w}"`),
    fc.constantFrom(...VARS).map((v) => `$(${v})`),
    fc.tuple(fc.constantFrom(...VARS), fc.constantFrom(...VARS)).map(([a, b]) => `$(${a})#$(${b})`),
    fc.constantFrom("2 minutes", "1 hour 30 minutes", "1h30m", "90", "PT1H", "x", "1h30").map((v) => `"${v}"`),
    fc.array(tie("value"), { maxLength: 4 }).map((vs) => `(${vs.join(" ")})`),
  ),
})).value;

const relation = fc.oneof(
  fc
    .tuple(fc.constantFrom(...ATTRS), fc.constantFrom("=", "!=", "<", ">="), fc.array(xrslValue, { maxLength: 4 }))
    .map(([a, op, vs]) => `(${a}${op}${vs.join(" ")})`),
  // Substitutions referring to each other: the raw material of expansion bombs.
  fc
    .array(fc.tuple(fc.constantFrom(...VARS), fc.array(fc.constantFrom(...VARS), { minLength: 1, maxLength: 4 })), { maxLength: 6 })
    .map(
      (defs) =>
        `(rsl_substitution=("A" "seed")("B" "x")("C" "y")("D" "z")${defs.map(([v, refs]) => `("${v}" ${refs.map((r) => `$(${r})`).join("#")})`).join("")})`,
    ),
);

const job = fc.letrec<{ job: string }>((tie) => ({
  job: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    fc.array(relation, { minLength: 1, maxLength: 8 }).map((rs) => `&(executable=/bin/true)${rs.join("")}`),
    fc.array(tie("job"), { minLength: 1, maxLength: 3 }).map((js) => `|${js.map((j) => `(${j})`).join("")}`),
  ),
})).job;

const xrslBody = fc.oneof(
  job,
  fc.array(job, { minLength: 1, maxLength: 6 }).map((js) => `+${js.map((j) => `(${j})`).join("")}`),
);

const VALID_XRSL = [
  '&(executable="/bin/echo")(arguments="hi")(stdout="out.txt")(outputfiles=("out.txt" ""))(walltime="1 hour 30 minutes")',
  '+(&(executable=/bin/a)(jobname="a"))(&(executable=/bin/b)(inputfiles=("in" "https://h/x" "cache=no")))',
  '&(rsl_substitution=("D" "/tmp"))(executable=$(D)/run)(arguments=$(D)#"/x" (nested (list)))(* comment *)',
];

/** Random edits of a text: insert, delete or replace a slice, or repeat one. */
function mutated(seeds: fc.Arbitrary<string>): fc.Arbitrary<string> {
  const edit = fc.tuple(
    fc.nat(),
    fc.nat({ max: 20 }),
    fc.oneof(fc.string({ maxLength: 8 }), fc.constantFrom("(", ")", '"', "'", "$(", "#", "+", "(*", "^", "<", "</", "/>", "&amp;", "]]>")),
    fc.nat({ max: 50 }),
  );
  return fc.tuple(seeds, fc.array(edit, { minLength: 1, maxLength: 6 })).map(([seed, edits]) => {
    let s = seed;
    for (const [at, len, ins, times] of edits) {
      const i = s.length === 0 ? 0 : at % s.length;
      if (times > 45) s = s.slice(0, i) + s.slice(i, i + len).repeat(times * 4) + s.slice(i + len);
      else s = s.slice(0, i) + ins + s.slice(i + len);
    }
    return s;
  });
}

describe("fuzz: xRSL reader", () => {
  it("random text", async () => {
    await fuzz(
      "xrsl-random",
      fc.oneof(
        fc.string(),
        fc.string({ unit: "binary" }),
        fc.string().map((s) => `&${s}`),
        fc.string().map((s) => `+(${s})`),
      ),
      checkBody,
    );
  });
  it("grammar-aware bodies (nested lists, |, +, substitution chains)", async () => {
    await fuzz("xrsl-grammar", xrslBody, checkBody);
  });
  it("mutations of valid descriptions", async () => {
    await fuzz("xrsl-mutated", mutated(fc.oneof(fc.constantFrom(...VALID_XRSL), xrslBody)), checkBody);
  });
  it("deep and wide shapes", async () => {
    const shape = fc
      .tuple(fc.nat({ max: 400 }), fc.constantFrom("(", "(&", "(a=", "$(", '("A" $(A)#'))
      .map(([n, open]) => `&(executable=/bin/true)(rsl_substitution=("A" "xy"))${open.repeat(n)}${")".repeat(n)}`);
    await fuzz("xrsl-deep", shape, checkBody, 100);
  });
});

// ---------------------------------------------------------------- ADL
const ADL_NS = 'xmlns="http://www.eu-emi.eu/es/2010/12/adl"';
const ELEMENTS = [
  "ActivityIdentification",
  "Name",
  "Application",
  "Executable",
  "Path",
  "Argument",
  "Output",
  "Environment",
  "Value",
  "Resources",
  "WallTime",
  "TotalCPUTime",
  "SlotRequirement",
  "NumberOfSlots",
  "DataStaging",
  "InputFile",
  "OutputFile",
  "Source",
  "Target",
  "URI",
  "Option",
  "RuntimeEnvironment",
  "Notification",
  "OnState",
  "Recipient",
];

const xml = fc.letrec<{ el: string }>((tie) => ({
  el: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    fc
      .tuple(
        fc.constantFrom(...ELEMENTS),
        fc.oneof(word, fc.constantFrom("600", "PT10M", "true", "a &amp; b", "&#x41;", "<![CDATA[x<y]]>", "")),
      )
      .map(([n, t]) => `<${n}>${t}</${n}>`),
    fc
      .tuple(fc.constantFrom(...ELEMENTS), fc.array(tie("el"), { maxLength: 4 }), fc.option(word))
      .map(([n, cs, attr]) => `<${n}${attr ? ` a="${attr}"` : ""}>${cs.join("")}</${n}>`),
  ),
})).el;

const adlDoc = fc.array(xml, { maxLength: 5 }).map((cs) => `<ActivityDescription ${ADL_NS}>${cs.join("")}</ActivityDescription>`);
const adlBody = fc.oneof(
  adlDoc,
  fc.array(adlDoc, { minLength: 1, maxLength: 5 }).map((ds) => `<ActivityDescriptions>${ds.join("")}</ActivityDescriptions>`),
);
const VALID_ADL = [
  `<ActivityDescription ${ADL_NS}><ActivityIdentification><Name>n</Name></ActivityIdentification><Application><Executable><Path>/bin/echo</Path><Argument>hi</Argument></Executable><Output>out</Output></Application><Resources><WallTime>600</WallTime></Resources><DataStaging><OutputFile><Name>out</Name></OutputFile></DataStaging></ActivityDescription>`,
  `<a:ActivityDescriptions xmlns:a="http://www.eu-emi.eu/es/2010/12/adl"><a:ActivityDescription><a:Application><a:Executable><a:Path>/bin/a</a:Path></a:Executable></a:Application></a:ActivityDescription><a:ActivityDescription/></a:ActivityDescriptions>`,
];

describe("fuzz: ADL reader", () => {
  it("random text", async () => {
    await fuzz(
      "adl-random",
      fc.oneof(
        fc.string().map((s) => `<${s}`),
        fc.string({ unit: "binary" }).map((s) => `<ActivityDescription>${s}</ActivityDescription>`),
      ),
      checkBody,
    );
  });
  it("grammar-aware documents and bundles", async () => {
    await fuzz("adl-grammar", adlBody, checkBody);
  });
  it("mutations of valid documents", async () => {
    await fuzz("adl-mutated", mutated(fc.oneof(fc.constantFrom(...VALID_ADL), adlBody)), checkBody);
  });
});

// ---------------------------------------------------------------- validator
const text = fc.oneof(
  word,
  fc.string({ maxLength: 20 }),
  fc.constantFrom("../x", "/abs", "a/../../b", "@list", "dir/", "", "a\0b", "file:///etc/passwd", "https://h/p", "é"),
);
const num = fc.oneof(fc.integer(), fc.double(), fc.constantFrom(0, -1, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 60));
const opt = <T>(a: fc.Arbitrary<T>) => fc.option(a, { nil: undefined });
const input = fc.record({
  name: text,
  source: opt(text),
  size: opt(num),
  checksum: opt(text),
  executable: fc.boolean(),
  delegationId: opt(text),
  options: fc.dictionary(text, text, { maxKeys: 3 }),
  locations: opt(fc.array(text, { maxLength: 2 })),
});
const output = fc.record({
  name: text,
  target: opt(text),
  delegationId: opt(text),
  options: fc.dictionary(text, text, { maxKeys: 3 }),
  useIfSuccess: fc.boolean(),
  useIfFailure: fc.boolean(),
  useIfCancel: fc.boolean(),
});
const description: fc.Arbitrary<JobDescription> = fc.record({
  language: fc.constantFrom("nordugrid:xrsl" as const, "emies:adl" as const),
  jobName: opt(text),
  executable: opt(text),
  arguments: fc.array(text, { maxLength: 4 }),
  successExitCode: opt(num),
  stdin: opt(text),
  stdout: opt(text),
  stderr: opt(text),
  logDir: opt(text),
  environment: fc.array(fc.record({ name: text, value: text }), { maxLength: 3 }),
  queue: opt(text),
  wallTimeSeconds: opt(num),
  cpuTimeSeconds: opt(num),
  memoryMB: opt(num),
  count: opt(num),
  countPerNode: opt(num),
  runtimeEnvironments: fc.array(fc.record({ name: text, version: opt(text), options: fc.array(text, { maxLength: 2 }) }), { maxLength: 2 }),
  inputFiles: fc.array(input, { maxLength: 3 }),
  outputFiles: fc.array(output, { maxLength: 3 }),
  delegationId: opt(text),
  freeStageIn: opt(fc.boolean()),
  lifetimeSeconds: opt(num),
  startTime: opt(fc.date({ noInvalidDate: false })),
  rerun: opt(num),
  priority: opt(num),
  notify: fc.array(text, { maxLength: 2 }),
  hints: fc.dictionary(text, text, { maxKeys: 2 }),
});

describe("fuzz: validator", () => {
  it("arbitrary normalized descriptions: a copy or an InvalidDescriptionError, input untouched", async () => {
    await fuzz(
      "validate",
      description,
      yielding((d: JobDescription) => {
        const before = JSON.stringify(d);
        try {
          validateDescription(d, { maxRerun: 5 });
        } catch (e) {
          if (!(e instanceof InvalidDescriptionError)) throw e;
        }
        if (JSON.stringify(d) !== before) throw new Error("validateDescription mutated its input");
      }),
    );
  });
});
