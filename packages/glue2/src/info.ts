/**
 * GLUE2 resource document for `GET /info` (docs/interface.md E2): what the
 * ARC broker and pyarcrest need, in GLUE2 element order. Pure: all facts come in through InfoInput.
 */
import { type El, el, intLeaf, leaf, leaves, withNs } from "./tree.js";
import { ARCREST_INTERFACE, GLUE2_NS, glueIds, glueTime, publishedEndpointUrl, splitRteName, voShareName } from "./glue.js";

export type HealthState = "ok" | "warning" | "critical" | "unknown" | "other";
export type ServingState = "production" | "draining" | "queueing" | "closed";

export interface JobCounts {
  total: number;
  running: number;
  waiting: number;
  staging: number;
  prelrms: number;
  suspended: number;
}

export interface QueueInput {
  name: string;
  /** Seconds. */
  maxWallTime?: number;
  /** Seconds. */
  defaultWallTime?: number;
  /** Seconds. */
  maxCpuTime?: number;
  /** Seconds. */
  defaultCpuTime?: number;
  /** MB. */
  maxMainMemory?: number;
  maxSlotsPerJob?: number;
  /**
   * GPUs one job may have in this queue; above 0 the queue's shares publish a GLUE 2.1
   * ComputingShareAcceleratorInfo of Type GPU with it (docs/glue2-brokers.md, GPUs).
   */
  maxGpusPerJob?: number;
  /** Defaults to the service's serving state. */
  serving?: ServingState;
  counts: Partial<JobCounts>;
  /** Slots of this queue; defaults to InfoInput.totalSlots (for FreeSlots). */
  totalSlots?: number;
  usedSlots?: number;
  freeSlots?: number;
  /** VOs allowed on the share → MappingPolicy. Omit for an open share (pyarcrest skips shares with one). */
  vos?: string[];
  /**
   * One more share per VO the queue admits, `<queue>_<vo>` (VO lower-cased in ID and Name), with a
   * `vo:<vo>` MappingPolicy, this VO's counters and the queue's limits and FreeSlots.
   */
  voShares?: VoShareInput[];
  /** Benchmarks of the queue's nodes, type → value (ComputingManager Benchmark elements). */
  benchmarks?: Record<string, number>;
}

export interface VoShareInput {
  /** As configured; lower-cased in the share's ID and Name, verbatim in its `vo:` rule. */
  vo: string;
  counts: Partial<JobCounts>;
  /** Defaults to the VO's running jobs. */
  usedSlots?: number;
}

export interface ExecutionEnvironmentInput {
  name?: string;
  /** GLUE2 Platform, e.g. `amd64`. */
  platform?: string;
  osFamily?: string;
  osName?: string;
  osVersion?: string;
  /** MB per node. */
  mainMemorySize?: number;
  logicalCpus?: number;
  connectivityIn?: boolean;
  connectivityOut?: boolean;
}

export interface InfoInput {
  /** Service endpoint URL, e.g. `https://host:8443/arex`; a `/rest[/x.y]` suffix is stripped. */
  endpointUrl: string;
  hostname: string;
  adminDomain: string;
  serviceName?: string;
  implementor?: string;
  implementationName?: string;
  implementationVersion: string;
  health: HealthState | { state: HealthState; info?: string };
  serving: ServingState;
  /** LRMS name (ComputingManager ProductName), e.g. `SLURM`. */
  lrms: string;
  lrmsVersion?: string;
  queues: QueueInput[];
  counts: JobCounts;
  totalSlots: number;
  totalLogicalCpus?: number;
  usedSlots?: number;
  /** Seconds a finished job's session directory is kept (default one week). */
  workingAreaLifeTime?: number;
  runtimeEnvironments: string[];
  executionEnvironment?: ExecutionEnvironmentInput;
  /** Advertised VOs → endpoint AccessPolicy (`vo:<name>` rules). */
  vos?: string[];
  /** GLUE2 Validity in seconds (default 600). */
  validity?: number;
  now: Date;
}

/** Capabilities A-REX publishes for its arcrest endpoint; `jobcreation` makes it a submission target. */
export const ARCREST_CAPABILITIES = [
  "executionmanagement.jobcreation",
  "executionmanagement.jobdescription",
  "executionmanagement.jobmanagement",
  "information.discovery.resource",
  "information.discovery.job",
  "information.lookup.job",
  "security.delegation",
] as const;

export const REST_INTERFACE_VERSIONS = ["1.0", "1.1"] as const;

function counters(c: Partial<JobCounts>): (El | undefined)[] {
  return [
    intLeaf("TotalJobs", c.total ?? 0),
    intLeaf("RunningJobs", c.running ?? 0),
    intLeaf("WaitingJobs", c.waiting ?? 0),
    intLeaf("StagingJobs", c.staging ?? 0),
    intLeaf("SuspendedJobs", c.suspended ?? 0),
    intLeaf("PreLRMSWaitingJobs", c.prelrms ?? 0),
  ];
}

export function buildInfoDocument(input: InfoInput): El {
  const host = input.hostname;
  const url = publishedEndpointUrl(input.endpointUrl);
  const stamp = { CreationTime: glueTime(input.now), Validity: String(input.validity ?? 600) };
  const base = (type: string) => ({ BaseType: type, ...stamp });
  const health = typeof input.health === "string" ? { state: input.health } : input.health;
  const shareIds = input.queues.flatMap((q) =>
    [q.name, ...(q.voShares ?? []).map((v) => voShareName(q.name, v.vo))].map((n) => glueIds.share(host, n)),
  );
  const endpointId = glueIds.endpoint(host, url);
  const eeName = input.executionEnvironment?.name ?? "execenv0";
  const eeId = glueIds.executionEnvironment(host, eeName);

  const endpoint = el(
    "ComputingEndpoint",
    [
      el("ID", endpointId),
      el("URL", url),
      leaves("Capability", [...ARCREST_CAPABILITIES]),
      el("Technology", "rest"),
      el("InterfaceName", ARCREST_INTERFACE),
      leaves("InterfaceVersion", [...REST_INTERFACE_VERSIONS]),
      el("Implementor", input.implementor ?? "ce-rest"),
      el("ImplementationName", input.implementationName ?? "ce-rest"),
      el("ImplementationVersion", input.implementationVersion),
      el("QualityLevel", "production"),
      el("HealthState", health.state),
      leaf("HealthStateInfo", health.info ?? defaultHealthInfo(health.state)),
      el("ServingState", input.serving),
      input.vos && input.vos.length > 0
        ? el(
            "AccessPolicy",
            [
              el("ID", glueIds.accessPolicy(host)),
              el("Scheme", "basic"),
              leaves(
                "Rule",
                input.vos.map((v) => `vo:${v}`),
              ),
              el("Associations", [el("EndpointID", endpointId)]),
            ],
            base("Policy"),
          )
        : undefined,
      el("Staging", "staginginout"),
      leaves("JobDescription", ["nordugrid:xrsl", "emies:adl"]),
      counters(input.counts),
      shareIds.length > 0 ? el("Associations", leaves("ComputingShareID", shareIds)) : undefined,
    ],
    base("Endpoint"),
  );

  const shares = input.queues.flatMap((q) => [
    buildShare(q, input, base, endpointId, eeId),
    ...(q.voShares ?? []).map((v) => buildShare(q, input, base, endpointId, eeId, v)),
  ]);

  const service = el(
    "ComputingService",
    [
      el("ID", glueIds.service(host)),
      el("Name", input.serviceName ?? host),
      leaves("Capability", [...ARCREST_CAPABILITIES]),
      el("Type", "org.nordugrid.arex"),
      el("QualityLevel", "production"),
      el("Complexity", `endpointType=1,share=${shareIds.length},resource=1`),
      counters(input.counts),
      endpoint,
      shares,
      buildManager(input, base, eeId, shareIds),
    ],
    base("Service"),
  );
  const domain = el(
    "AdminDomain",
    [
      el("ID", glueIds.adminDomain(input.adminDomain)),
      el("Name", input.adminDomain),
      el("Distributed", "false"),
      el("Services", [service]),
    ],
    base("Domain"),
  );
  // InfoRoot itself is namespace-less (as A-REX publishes it); GLUE2 starts at Domains.
  return el("InfoRoot", [withNs(el("Domains", [domain]), GLUE2_NS)]);
}

type BaseAttrs = (type: string) => Record<string, string>;

function sumCounts(c: Partial<JobCounts>): number {
  return (c.running ?? 0) + (c.waiting ?? 0) + (c.staging ?? 0) + (c.prelrms ?? 0) + (c.suspended ?? 0);
}

function defaultHealthInfo(state: HealthState): string | undefined {
  return state === "ok" ? "OK" : undefined;
}

/** The queue's share, or with `vo` the queue's share for that VO. */
function buildShare(q: QueueInput, input: InfoInput, base: BaseAttrs, endpointId: string, eeId: string, vo?: VoShareInput): El {
  const host = input.hostname;
  const queueUsed = q.usedSlots ?? q.counts.running ?? 0;
  // Free slots are the queue's, whoever's share: a VO share can use every free slot of its queue.
  const free = q.freeSlots ?? Math.max(0, (q.totalSlots ?? input.totalSlots) - queueUsed);
  const counts = vo ? vo.counts : q.counts;
  const running = counts.running ?? 0;
  const used = vo ? (vo.usedSlots ?? running) : queueUsed;
  const name = vo ? voShareName(q.name, vo.vo) : q.name;
  const vos = vo ? [vo.vo] : q.vos;
  return el(
    "ComputingShare",
    [
      el("ID", glueIds.share(host, name)),
      el("Name", name),
      el("MappingQueue", q.name),
      intLeaf("MaxWallTime", q.maxWallTime),
      intLeaf("DefaultWallTime", q.defaultWallTime),
      intLeaf("MaxCPUTime", q.maxCpuTime),
      intLeaf("DefaultCPUTime", q.defaultCpuTime),
      intLeaf("MaxSlotsPerJob", q.maxSlotsPerJob),
      intLeaf("MaxMainMemory", q.maxMainMemory),
      el("ServingState", q.serving ?? input.serving),
      intLeaf("TotalJobs", counts.total ?? sumCounts(counts)),
      intLeaf("RunningJobs", running),
      intLeaf("WaitingJobs", counts.waiting ?? 0),
      intLeaf("SuspendedJobs", counts.suspended ?? 0),
      intLeaf("StagingJobs", counts.staging ?? 0),
      intLeaf("PreLRMSWaitingJobs", counts.prelrms ?? 0),
      intLeaf("FreeSlots", free),
      intLeaf("UsedSlots", used),
      vos && vos.length > 0
        ? el(
            "MappingPolicy",
            [
              el("ID", glueIds.mappingPolicy(host, name)),
              el("Scheme", "basic"),
              leaves(
                "Rule",
                vos.map((v) => `vo:${v}`),
              ),
            ],
            base("Policy"),
          )
        : undefined,
      q.maxGpusPerJob
        ? el(
            "ComputingShareAcceleratorInfo",
            [
              el("ID", glueIds.shareAccelerator(host, name, "GPU")),
              el("Type", "GPU"),
              intLeaf("MaxAcceleratorSlotsPerJob", q.maxGpusPerJob),
              el("Associations", [el("ComputingShareID", glueIds.share(host, name))]),
            ],
            base("Entity"),
          )
        : undefined,
      el("Associations", [el("ComputingEndpointID", endpointId), el("ExecutionEnvironmentID", eeId)]),
    ],
    base("Share"),
  );
}

function buildManager(input: InfoInput, base: BaseAttrs, eeId: string, shareIds: string[]): El {
  const host = input.hostname;
  const ee = input.executionEnvironment ?? {};
  const bool = (b: boolean | undefined, dflt: boolean) => String(b ?? dflt);
  const execEnv = el(
    "ExecutionEnvironment",
    [
      el("ID", eeId),
      el("Name", ee.name ?? "execenv0"),
      el("Platform", ee.platform ?? "amd64"),
      intLeaf("LogicalCPUs", ee.logicalCpus),
      intLeaf("MainMemorySize", ee.mainMemorySize),
      el("OSFamily", ee.osFamily ?? "linux"),
      leaf("OSName", ee.osName),
      leaf("OSVersion", ee.osVersion),
      el("ConnectivityIn", bool(ee.connectivityIn, false)),
      el("ConnectivityOut", bool(ee.connectivityOut, true)),
      shareIds.length > 0 ? el("Associations", leaves("ComputingShareID", shareIds)) : undefined,
    ],
    base("Resource"),
  );
  const apps = input.runtimeEnvironments.map((rte, i) => {
    const { appName, appVersion } = splitRteName(rte);
    return el("ApplicationEnvironment", [
      el("ID", glueIds.applicationEnvironment(host, i)),
      el("AppName", appName),
      leaf("AppVersion", appVersion),
      el("State", "installednotverified"),
    ]);
  });
  return el(
    "ComputingManager",
    [
      el("ID", glueIds.manager(host, input.lrms)),
      el("ProductName", input.lrms),
      leaf("ProductVersion", input.lrmsVersion),
      intLeaf("TotalLogicalCPUs", input.totalLogicalCpus ?? input.totalSlots),
      intLeaf("TotalSlots", input.totalSlots),
      intLeaf("SlotsUsedByGridJobs", input.usedSlots),
      intLeaf("WorkingAreaLifeTime", input.workingAreaLifeTime ?? 604800),
      input.queues.flatMap((q) =>
        Object.entries(q.benchmarks ?? {}).map(([type, value]) =>
          el(
            "Benchmark",
            [el("ID", glueIds.benchmark(host, q.name, type)), el("Type", type), el("Value", String(value))],
            base("Benchmark"),
          ),
        ),
      ),
      el("ExecutionEnvironments", [execEnv]),
      // Always an element with children or absent: pyarcrest crashes on an empty-string value here.
      apps.length > 0 ? el("ApplicationEnvironments", apps) : undefined,
    ],
    base("Manager"),
  );
}
