/**
 * The normalized job description. Both parsers (xRSL and ADL) produce exactly this shape, so the
 * gateway, the JEM and the batch back ends never look at the source language again.
 *
 * Units are fixed here: times in seconds, memory and disk in MB (ADL bytes are rounded up).
 */

export type DescriptionLanguage = "nordugrid:xrsl" | "emies:adl";

export interface InputFile {
  /** Path relative to the session directory, normalized, never starting with `/`, never leaving it. */
  name: string;
  /** Remote URL the JEM downloads; `undefined` means the client uploads the file. */
  source?: string | undefined;
  /** Expected size in bytes for client uploads (xRSL `"name" "1234"` or `"1234.crc"`). */
  size?: number | undefined;
  checksum?: string | undefined;
  executable: boolean;
  /** Per-file delegation (xRSL `delegationid=` option, ADL `Source/DelegationID`). */
  delegationId?: string | undefined;
  /** URL options (`cache=no`, `threads=2`, ...). */
  options: Record<string, string>;
  /** Replica locations for index-service URLs (xRSL `location=` option, ADL Option `location`). */
  locations?: string[] | undefined;
}

export interface OutputFile {
  /** Path relative to the session directory; a trailing `/` means a directory; `@name` a dynamic list. */
  name: string;
  /** Remote URL the JEM uploads to; `undefined` means it is kept for the client to download. */
  target?: string | undefined;
  delegationId?: string | undefined;
  options: Record<string, string>;
  /** Replica locations for index-service URLs (xRSL `location=` option, ADL Option `location`). */
  locations?: string[] | undefined;
  /** Which outcomes this output is delivered for (ADL UseIf*, xRSL `preserve=yes`). */
  useIfSuccess: boolean;
  useIfFailure: boolean;
  useIfCancel: boolean;
}

export interface RuntimeEnvironmentRequest {
  /** e.g. `ENV/PROXY` or `APPS/HEP/ATLAS` */
  name: string;
  /** e.g. `1.2.3`; undefined when the request has no version. */
  version?: string | undefined;
  options: string[];
}

export interface EnvironmentVariable {
  name: string;
  value: string;
}

/**
 * A program run before or after the main executable (ADL PreExecutable/PostExecutable), in the
 * session dir as the job's account; one that exits with another code than `successExitCode`
 * (default 0) fails the job. xRSL has no equivalent.
 */
export interface AuxExecutable {
  /** Same forms as `executable`: session-relative (an input file), absolute, or `$VAR/...`. */
  path: string;
  arguments: string[];
  /** ADL FailIfExitCodeNotEqualTo; default 0. */
  successExitCode?: number | undefined;
}

export interface JobDescription {
  language: DescriptionLanguage;
  jobName?: string | undefined;
  /** Executable path (relative to the session dir, absolute, or `$VAR`); undefined for data-only jobs. */
  executable?: string | undefined;
  arguments: string[];
  /** Exit code that counts as success (ADL FailIfExitCodeNotEqualTo); default 0. */
  successExitCode?: number | undefined;
  stdin?: string | undefined;
  stdout?: string | undefined;
  stderr?: string | undefined;
  /** Log directory name inside the session dir (xRSL gmlog, ADL LoggingDirectory). */
  logDir?: string | undefined;
  environment: EnvironmentVariable[];
  /** Run in order before the executable; absent = none (descriptions stored before they existed too). */
  preExecutables?: AuxExecutable[] | undefined;
  /** Run in order after the executable. */
  postExecutables?: AuxExecutable[] | undefined;

  queue?: string | undefined;
  wallTimeSeconds?: number | undefined;
  cpuTimeSeconds?: number | undefined;
  /** Per slot, MB. */
  memoryMB?: number | undefined;
  virtualMemoryMB?: number | undefined;
  diskMB?: number | undefined;
  /** Number of slots (xRSL count, ADL NumberOfSlots); default 1. */
  count?: number | undefined;
  countPerNode?: number | undefined;
  /** GPUs per job (xRSL `gpus`, ADL `<Coprocessor>CUDA|GPU</Coprocessor>` = 1); docs/gpus.md. */
  gpus?: number | undefined;
  exclusive?: boolean | undefined;
  runtimeEnvironments: RuntimeEnvironmentRequest[];

  inputFiles: InputFile[];
  outputFiles: OutputFile[];
  /** Main delegation for data staging (xRSL delegationid, ADL nordugrid-adl:DelegationID). */
  delegationId?: string | undefined;
  /** ADL ClientDataPush / xRSL input named `/`. */
  freeStageIn?: boolean | undefined;

  /** Session directory lifetime after the job finished, seconds. */
  lifetimeSeconds?: number | undefined;
  /** Do not start before this time. */
  startTime?: Date | undefined;
  /** Restarts allowed (xRSL rerun, ADL nordugrid-adl:Rerun); default 0. */
  rerun?: number | undefined;
  /** 1–100, default 50. */
  priority?: number | undefined;
  dryRun?: boolean | undefined;
  /** Raw ACL XML, stored in the `acl` control file. */
  acl?: string | undefined;
  /** xRSL notify / ADL Notification, as `"<flags> <email>"` strings. */
  notify: string[];
  projectName?: string | undefined;
  /** Brokering hints that are stored but not acted upon (opsys, architecture, nodeaccess, ...). */
  hints: Record<string, string>;
}

export function emptyDescription(language: DescriptionLanguage): JobDescription {
  return {
    language,
    arguments: [],
    environment: [],
    runtimeEnvironments: [],
    inputFiles: [],
    outputFiles: [],
    notify: [],
    hints: {},
  };
}
