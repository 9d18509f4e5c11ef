/**
 * ADL (EMI-ES ActivityDescription) semantics as A-REX reads them → the normalized `JobDescription`.
 * Elements are matched by local name, so `adl:`/default-namespace/`nordugrid-adl:` all work.
 * Range and path checks are left to validate.ts.
 */
import { InvalidDescriptionError, positionAt } from "../../errors.js";
import { emptyDescription, type AuxExecutable, type InputFile, type JobDescription, type OutputFile } from "../types.js";
import { SECOND, parseBoolean, parseDuration, parseInteger, parseTimestamp, splitUrlOptions } from "../values.js";
import { child, children, type XNode } from "./xml.js";

const MIB = 1024 * 1024;

/** Notification OnState values (EMI-ES and A-REX state names) → xRSL notify flags. */
const NOTIFY_FLAGS: Record<string, string> = {
  preprocessing: "b",
  preparing: "b",
  accepted: "b",
  "processing-queued": "q",
  processing: "q",
  inlrms: "q",
  postprocessing: "f",
  finishing: "f",
  terminal: "e",
  finished: "e",
  deleted: "d",
  canceling: "c",
};

class AdlReader {
  readonly d = emptyDescription("emies:adl");
  constructor(private readonly text: string) {}

  fail(node: XNode, detail: string): never {
    const pos = positionAt(this.text, node.start);
    throw new InvalidDescriptionError(`ADL element <${node.local}> (line ${pos.line}, column ${pos.column}): ${detail}`, node.local, pos);
  }

  str(node: XNode): string {
    return node.text.trim();
  }

  int(node: XNode): number {
    const s = this.str(node);
    return parseInteger(s) ?? this.fail(node, `'${s}' is not a whole number`);
  }

  bool(node: XNode): boolean {
    const s = this.str(node);
    return parseBoolean(s) ?? this.fail(node, `'${s}' is not true or false`);
  }

  /** ADL times are seconds; ISO-8601 durations (`PT10M`) are accepted as well. */
  seconds(node: XNode): number {
    const s = this.str(node);
    return parseDuration(s, SECOND) ?? this.fail(node, `'${s}' is not a number of seconds or an ISO-8601 duration`);
  }

  /** Bytes → MB, rounded up (A-REX does the same). */
  megabytes(node: XNode): number {
    const bytes = this.int(node);
    if (bytes < 0) this.fail(node, "must not be negative (the value is in bytes)");
    return Math.ceil(bytes / MIB);
  }

  required(parent: XNode, local: string): XNode {
    return child(parent, local) ?? this.fail(parent, `<${local}> is required`);
  }

  /** Elements refused by name, each with the reason the user reads (docs/adl.md). */
  unsupported(parent: XNode, reasons: Record<string, string>): void {
    for (const [local, why] of Object.entries(reasons)) {
      const n = child(parent, local);
      if (n) this.fail(n, `is not supported by this computing element: ${why}`);
    }
  }

  read(ad: XNode): JobDescription {
    const id = child(ad, "ActivityIdentification");
    const name = id && child(id, "Name");
    if (name) this.d.jobName = this.str(name);
    const app = child(ad, "Application");
    if (app) this.application(app);
    const res = child(ad, "Resources");
    if (res) this.resources(res);
    const ds = child(ad, "DataStaging");
    if (ds) this.dataStaging(ds);
    return this.d;
  }

  private application(app: XNode): void {
    const d = this.d;
    const exe = child(app, "Executable");
    if (exe) {
      const path = child(exe, "Path");
      if (path) d.executable = this.str(path);
      // Arguments are kept verbatim: surrounding blanks may matter to the program.
      d.arguments = children(exe, "Argument").map((a) => a.text);
      const code = child(exe, "FailIfExitCodeNotEqualTo");
      if (code) d.successExitCode = this.int(code);
    }
    const pre = children(app, "PreExecutable").map((n) => this.auxExecutable(n));
    if (pre.length) d.preExecutables = pre;
    const post = children(app, "PostExecutable").map((n) => this.auxExecutable(n));
    if (post.length) d.postExecutables = post;
    const input = child(app, "Input");
    if (input) d.stdin = this.str(input);
    const output = child(app, "Output");
    if (output) d.stdout = this.str(output);
    const error = child(app, "Error");
    if (error) d.stderr = this.str(error);
    const logDir = child(app, "LoggingDirectory");
    if (logDir) d.logDir = this.str(logDir);
    for (const env of children(app, "Environment")) {
      d.environment.push({ name: this.str(this.required(env, "Name")), value: child(env, "Value")?.text ?? "" });
    }
    // WipeTime (a duration) is the session lifetime; ExpirationTime counts only if it is a duration too.
    const wipe = child(app, "WipeTime");
    const expiration = child(app, "ExpirationTime");
    if (wipe) d.lifetimeSeconds = this.seconds(wipe);
    else if (expiration) {
      const s = this.str(expiration);
      const secs = parseDuration(s, SECOND);
      if (secs !== undefined) d.lifetimeSeconds = secs;
      else if (parseTimestamp(s)) d.hints.expirationtime = s;
      else this.fail(expiration, `'${s}' is neither a duration nor a time`);
    }
    for (const n of children(app, "Notification")) this.notification(n);
    // A-REX turns RemoteLogging into per-job accounting report URLs (xRSL jobreport); stored as
    // that hint, not acted upon: accounting goes where the site configures it.
    for (const n of children(app, "RemoteLogging")) {
      const url = this.str(this.required(n, "URL"));
      if (!URL.canParse(url)) this.fail(n, `'${url}' is not a URL`);
      d.hints.jobreport = d.hints.jobreport === undefined ? url : `${d.hints.jobreport}; ${url}`;
    }
    const rerun = child(app, "Rerun");
    if (rerun) d.rerun = this.int(rerun);
    const priority = child(app, "Priority");
    if (priority) d.priority = this.int(priority);
    const start = child(app, "StartTime");
    if (start) {
      const s = this.str(start);
      d.startTime = parseTimestamp(s) ?? this.fail(start, `'${s}' is not a time such as 2025-03-01T12:00:00Z`);
    }
    const acl = child(app, "AccessControl");
    if (acl) d.acl = this.text.slice(acl.innerStart, acl.innerEnd).trim();
    const dry = child(app, "DryRun");
    if (dry) d.dryRun = this.bool(dry);
    const cred = child(app, "CredentialService");
    if (cred) d.hints.credentialserver = this.str(cred);
  }

  /** Pre/PostExecutable: the same shape as Executable, but a Path is required (ADL's schema). */
  private auxExecutable(n: XNode): AuxExecutable {
    const path = this.str(this.required(n, "Path"));
    if (path === "") this.fail(n, "<Path> must not be empty");
    const x: AuxExecutable = { path, arguments: children(n, "Argument").map((a) => a.text) };
    const code = child(n, "FailIfExitCodeNotEqualTo");
    if (code) x.successExitCode = this.int(code);
    return x;
  }

  private notification(n: XNode): void {
    const protocol = child(n, "Protocol");
    // Only e-mail notification exists; other protocols are ignored like A-REX does.
    if (protocol && this.str(protocol).toLowerCase() !== "email") return;
    const recipients = children(n, "Recipient")
      .map((r) => this.str(r))
      .filter((r) => r !== "");
    if (recipients.length === 0) this.fail(n, "needs at least one <Recipient>");
    let flags = "";
    for (const s of children(n, "OnState")) {
      const flag = NOTIFY_FLAGS[this.str(s).toLowerCase()] ?? this.fail(s, `unknown state '${this.str(s)}'`);
      if (!flags.includes(flag)) flags += flag;
    }
    this.d.notify.push(`${flags || "be"} ${recipients.join(" ")}`);
  }

  private resources(res: XNode): void {
    const d = this.d;
    this.unsupported(res, {
      NetworkInfo: "jobs cannot be placed by network type (A-REX refuses it too)",
      Benchmark: "choose the computing element by the benchmarks it publishes instead (A-REX refuses it too)",
    });
    const cop = child(res, "Coprocessor");
    if (cop) {
      // EMI-ES names the kind, not a number: a GPU kind is one GPU; optional="true" asks for none.
      const kind = this.str(cop);
      if (!/^(CUDA|GPU|OpenCL)$/i.test(kind))
        this.fail(cop, `'${kind}' is not supported by this computing element (CUDA, GPU or OpenCL: one GPU)`);
      if (parseBoolean(cop.attrs.optional ?? "") !== true) d.gpus = 1;
    }
    // Checked as A-REX checks it, then not used: the session dir is reached through this CE only.
    const remote = child(res, "RemoteSessionAccess");
    if (remote) this.bool(remote);
    const queue = child(res, "QueueName");
    if (queue) d.queue = this.str(queue);
    const wall = child(res, "WallTime");
    if (wall) d.wallTimeSeconds = this.seconds(wall);
    const slots = child(res, "SlotRequirement");
    if (slots) {
      const n = child(slots, "NumberOfSlots");
      if (n) d.count = this.int(n);
      const perHost = child(slots, "SlotsPerHost");
      if (perHost) {
        const useSlots = perHost.attrs.useNumberOfSlots ?? "";
        d.countPerNode = parseBoolean(useSlots) === true && d.count !== undefined ? d.count : this.int(perHost);
      }
      const excl = child(slots, "ExclusiveExecution");
      if (excl) d.exclusive = this.bool(excl);
    }
    const total = child(res, "TotalCPUTime");
    const individual = child(res, "IndividualCPUTime");
    // cpuTimeSeconds is the total over all slots; a per-slot limit is scaled by the slot count.
    if (total) d.cpuTimeSeconds = this.seconds(total);
    else if (individual) d.cpuTimeSeconds = this.seconds(individual) * (d.count ?? 1);
    const mem = child(res, "IndividualPhysicalMemory");
    if (mem) d.memoryMB = this.megabytes(mem);
    const vmem = child(res, "IndividualVirtualMemory");
    if (vmem) d.virtualMemoryMB = this.megabytes(vmem);
    const disk = child(res, "DiskSpaceRequirement");
    if (disk) {
      if (this.int(disk) <= 0) this.fail(disk, "must be a positive number of bytes");
      d.diskMB = this.megabytes(disk);
    }
    for (const rte of children(res, "RuntimeEnvironment")) {
      // ARC clients write an empty <Version/> for a runtime environment requested without one.
      const version = child(rte, "Version");
      const v = version ? this.str(version) : "";
      d.runtimeEnvironments.push({
        name: this.str(this.required(rte, "Name")),
        version: v === "" ? undefined : v,
        options: children(rte, "Option").map((o) => this.str(o)),
      });
    }
    const os = child(res, "OperatingSystem");
    if (os) {
      for (const [local, key] of [
        ["Family", "osfamily"],
        ["Name", "osname"],
        ["Version", "osversion"],
      ] as const) {
        const n = child(os, local);
        if (n) d.hints[key] = this.str(n);
      }
    }
    const platform = child(res, "Platform");
    if (platform) d.hints.platform = this.str(platform);
    const access = child(res, "NodeAccess");
    if (access) {
      const a = this.str(access);
      if (!/^(inbound|outbound|inoutbound)$/.test(a)) this.fail(access, `'${a}' is not one of inbound, outbound, inoutbound`);
      d.hints.nodeaccess = a;
    }
    const parallel = child(res, "ParallelEnvironment");
    if (parallel) {
      // Only the type is kept (a hint); the rest is checked as A-REX checks it, then not used.
      const ptype = child(parallel, "Type");
      if (ptype) d.hints.parallelenvironment = this.str(ptype);
      for (const local of ["ProcessesPerSlot", "ThreadsPerProcess"]) {
        const n = child(parallel, local);
        if (n) this.int(n);
      }
      for (const o of children(parallel, "Option")) this.required(o, "Name");
    }
  }

  private dataStaging(ds: XNode): void {
    const d = this.d;
    const push = child(ds, "ClientDataPush");
    if (push) d.freeStageIn = this.bool(push);
    const deleg = child(ds, "DelegationID");
    if (deleg) d.delegationId = this.str(deleg);
    for (const inNode of children(ds, "InputFile")) {
      const f: InputFile = { name: this.str(this.required(inNode, "Name")), executable: false, options: {} };
      const exe = child(inNode, "IsExecutable");
      if (exe) f.executable = this.bool(exe);
      // Several Sources are alternatives; the first one is used.
      const src = child(inNode, "Source");
      if (src) {
        this.location(src, f);
        f.source = this.url(src, f);
      }
      d.inputFiles.push(f);
    }
    for (const outNode of children(ds, "OutputFile")) {
      const name = this.str(this.required(outNode, "Name"));
      const targets = children(outNode, "Target");
      // A file without Target is kept in the session dir for the client, whatever the outcome.
      if (targets.length === 0) {
        d.outputFiles.push({ name, options: {}, useIfSuccess: true, useIfFailure: true, useIfCancel: true });
      }
      // One output entry per Target: the file is uploaded to each of them.
      for (const t of targets) d.outputFiles.push(this.target(name, t));
    }
  }

  private target(name: string, t: XNode): OutputFile {
    const flag = (local: string, dflt: boolean): boolean => {
      const n = child(t, local);
      return n ? this.bool(n) : dflt;
    };
    const f: OutputFile = {
      name,
      options: {},
      useIfSuccess: flag("UseIfSuccess", true),
      useIfFailure: flag("UseIfFailure", false),
      useIfCancel: flag("UseIfCancel", false),
    };
    this.location(t, f);
    f.target = this.url(t, f);
    // Mandatory: checked as A-REX checks it and not used (A-REX drops it too).
    const mandatory = child(t, "Mandatory");
    if (mandatory) this.bool(mandatory);
    const creation = child(t, "CreationFlag");
    if (creation) {
      const c = this.str(creation);
      if (c === "append") this.fail(creation, "'append' is not supported; use overwrite or dontOverwrite");
      else if (c === "overwrite") f.options.overwrite = "yes";
      else if (c === "dontOverwrite") f.options.overwrite = "no";
      else this.fail(creation, `'${c}' is not one of overwrite, dontOverwrite`);
    }
    return f;
  }

  /** Source/Target: URI (with `;opt=val` split off), DelegationID, Option{Name,Value}. */
  private location(n: XNode, f: InputFile | OutputFile): void {
    const deleg = child(n, "DelegationID");
    if (deleg) f.delegationId = this.str(deleg);
    for (const o of children(n, "Option")) {
      const key = this.str(this.required(o, "Name"));
      const value = this.str(this.required(o, "Value"));
      if (key.toLowerCase() === "location") (f.locations ??= []).push(value);
      else f.options[key] = value;
    }
  }

  private url(n: XNode, f: InputFile | OutputFile): string {
    const uri = this.required(n, "URI");
    const raw = this.str(uri);
    const split = splitUrlOptions(raw) ?? this.fail(uri, `URL '${raw}' has an option without '=value'`);
    // Explicit <Option> elements win over options embedded in the URL.
    f.options = { ...split.options, ...f.options };
    return split.url;
  }
}

export function adlToDescription(ad: XNode, text: string): JobDescription {
  return new AdlReader(text).read(ad);
}
