import { readFile } from "node:fs/promises";
import { closeHandle, openParent, openRegular, removeEntry, removePath, SessionFsError } from "@ce/sessionfs";
import { type JobCredential, type JobRecord, type QueueCatalog, mapLimit, redisTrouble } from "@ce/store";
import { appendInputs } from "@ce/controldir";
import { enqueueAdvance, jobLog, type JemContext } from "../context.js";
import { credentialFor } from "../credentials.js";
import { logErrors, readInputStatus, readSpec, utcStamp, writePrivate } from "../files.js";
import { FairSlots } from "../semaphore.js";
import { redact, transferClient, withRetries, type TransferClient } from "./http.js";
import { destinationPolicy } from "./destinations.js";
import { fetchInput, sendOutput } from "./protocols/index.js";
import { fileFacts, outputStatusLine, outputStatusNames, schemeOf, type StagingProtocol } from "./report.js";
import { xrootdCertDir } from "./protocols/xrootd-auth.js";
import { toolAccountOf, toolRunner } from "./tools.js";
import { runAsOf } from "../priv/jobs.js";
import { filesUnder, outputPlan, purgeSession, type Outcome } from "./outputs.js";
import { refusalText, sessionSegments } from "./paths.js";
import { blameAll, blameOf, type Blame } from "./blame.js";
import { cachedDownload, openInputCache, type InputCache } from "./cache/index.js";

/** Transfers of one job running at once (the worker's concurrency bounds jobs). */
const PER_JOB = 4;
const PROGRESS_MS = 10_000;

export function outcomeOf(job: JobRecord): Outcome {
  return job.failedCause === "client" ? "killed" : job.failure ? "failed" : "success";
}

/**
 * One staging run: all missing downloads of a PREPARING job, or purge + uploads of a FINISHING
 * job. Results land in control files (`input_status`, `output_status`, `statistics`, `errors`,
 * and the private `stagein.failed` / `stageout.done`); the state handlers make the transitions.
 */
export function createStagingProcessor(ctx: JemContext) {
  const { maxConcurrentTransfers, maxTransfersPerOwner } = ctx.config.staging;
  // Shared by every job of this JEM: a slot is held for one attempt, never across a retry's wait.
  const slots = new FairSlots(maxConcurrentTransfers, maxTransfersPerOwner ?? Math.max(1, Math.floor(maxConcurrentTransfers / 2)));
  const policy = destinationPolicy(ctx.config);
  const caFile = ctx.config.staging.caFile;
  const caPem = caFile
    ? readFile(caFile, "utf8").catch((e: unknown) => {
        ctx.log.error({ err: e, caFile }, "staging CA file unreadable; only system roots are trusted");
        return undefined;
      })
    : Promise.resolve(undefined);
  const cache = openInputCache(ctx);
  // Built on the first xrootd-capable client: the site's CA directory plus staging.caFile.
  let certDir: Promise<string | undefined> | undefined;
  const xrdCertDir = () =>
    (certDir ??= caPem
      .then((pem) => xrootdCertDir(ctx.config.auth.caDir, pem))
      .catch((e: unknown) => {
        ctx.log.error({ err: e }, "xrootd CA directory not built; xrdcp uses its default");
        return undefined;
      }));

  return async function processStaging(data: QueueCatalog["staging"]): Promise<void> {
    const job = await ctx.jobs.get(data.jobId);
    if (!job || job.killRequested) return;
    const wanted = data.direction === "in" ? "PREPARING" : "FINISHING";
    if (job.state !== wanted || job.pending) return;
    const ac = new AbortController();
    ctx.aborts.get(job.id)?.abort();
    ctx.aborts.set(job.id, ac);
    const clients = new Map<string, TransferClient>();
    // Tools (xrdcp, xrdfs) run as the job's mapped account; its lookup waits for the first tool.
    const tools = toolRunner(async () => toolAccountOf(await runAsOf(ctx, job)));
    const clientFor = async (delegationId: string | undefined): Promise<TransferClient> => {
      const key = delegationId ?? "";
      let c = clients.get(key);
      if (!c) {
        const cred: JobCredential | undefined = await credentialFor(ctx, job, delegationId);
        const { connectTimeoutMs, idleTimeoutMs, allowAnyAudienceTokens } = ctx.config.staging;
        c = transferClient(cred, {
          caPem: await caPem,
          connectTimeoutMs,
          idleTimeoutMs,
          allowAnyAudience: allowAnyAudienceTokens,
          policy,
          certDir: await xrdCertDir(),
          tools,
        });
        clients.set(key, c);
      }
      return c;
    };
    try {
      if (data.direction === "in") await stageIn(ctx, job, ac, clientFor, slots, await cache);
      else await stageOut(ctx, job, ac, clientFor, slots);
    } finally {
      if (ctx.aborts.get(job.id) === ac) ctx.aborts.delete(job.id);
      await Promise.all([...clients.values()].map((c) => c.close().catch(() => undefined)));
    }
    if (!ac.signal.aborted) await enqueueAdvance(ctx, job.id, `staged-${data.direction}`, 0, job.requestId, { urgent: true });
  };
}

type ClientFor = (delegationId: string | undefined) => Promise<TransferClient>;

function transferSignal(ctx: JemContext, ac: AbortController): AbortSignal {
  return AbortSignal.any([ac.signal, AbortSignal.timeout(ctx.config.staging.timeoutMs)]);
}

/**
 * One file's transfer: each attempt waits for a slot of the job's owner (FairSlots), runs with it
 * under the per-attempt time bound, and gives it back before any wait for a retry.
 */
async function transfer<T>(
  ctx: JemContext,
  job: JobRecord,
  ac: AbortController,
  slots: FairSlots,
  what: string,
  protocol: StagingProtocol,
  fn: (signal: AbortSignal, onBytes: (n: number) => void) => Promise<T>,
): Promise<T> {
  const log = jobLog(ctx, job);
  return withRetries(
    () =>
      slots.run(
        job.owner,
        async () => {
          let bytes = 0;
          const t0 = Date.now();
          const progress = setInterval(
            () => log.info({ what, bytes, seconds: Math.round((Date.now() - t0) / 1000) }, "transfer in progress"),
            PROGRESS_MS,
          );
          progress.unref();
          const direction = what.startsWith("download") ? "in" : "out";
          try {
            return await fn(transferSignal(ctx, ac), (n) => {
              bytes += n;
              ctx.metrics?.addStagingBytes(direction, n, protocol);
            });
          } catch (e) {
            ctx.metrics?.countStagingFailure(direction, protocol);
            throw e;
          } finally {
            clearInterval(progress);
          }
        },
        ac.signal,
      ),
    {
      retries: ctx.config.staging.maxRetries,
      baseMs: ctx.config.staging.retryBaseMs,
      signal: ac.signal,
      onRetry: (e, attempt, delay) => {
        log.warn({ what, attempt, delayMs: Math.round(delay), err: e.message }, "transfer failed, retrying");
        void logErrors(ctx, job.id, `Staging: ${what} failed (${e.message}), retry ${attempt} in ${Math.round(delay / 1000)} s`);
      },
    },
  );
}

async function stageIn(
  ctx: JemContext,
  job: JobRecord,
  ac: AbortController,
  clientFor: ClientFor,
  slots: FairSlots,
  cache: InputCache | undefined,
): Promise<void> {
  const desc = await readSpec(ctx, job.id);
  if (!desc) return;
  const done = (await readInputStatus(ctx, job.id)).paths;
  const todo = desc.inputFiles.filter((f) => f.source && !done.has(f.name));
  if (todo.length === 0) return;
  const log = jobLog(ctx, job);
  log.info({ files: todo.length }, "stage-in started");
  const session = ctx.control.sessionDir(job.id);
  const failures: string[] = [];
  const blames: Blame[] = [];
  await mapLimit(todo, PER_JOB, async (f) => {
    if (ac.signal.aborted || failures.length > 0) return;
    const url = f.source!;
    const scheme = schemeOf(url);
    const start = new Date();
    let replica: string | undefined;
    let sum: string | undefined;
    try {
      // Parents are created and entered without following links (a restarted job's session may
      // hold whatever the job left); an existing entry of that name is removed, never followed.
      const segs = sessionSegments(f.name);
      const { dir, name } = await openParent(session, segs, true);
      let size: number;
      let fromCache = false;
      try {
        await removeEntry(dir, name!, `/${f.name}`).catch((e: unknown) => {
          if (!(e instanceof SessionFsError && e.kind === "missing")) throw e;
        });
        const client = await clientFor(f.delegationId ?? desc.delegationId);
        const dest = { dir, name: name!, at: `/${f.name}` };
        const o = {
          size: f.size,
          checksum: f.checksum,
          options: f.options,
          mode: f.executable ? 0o755 : undefined,
          localInputPrefixes: ctx.config.staging.localInputPrefixes,
          rucio: ctx.config.staging.rucio,
        };
        const get =
          (signal: AbortSignal, onBytes: (n: number) => void) =>
          (into: typeof dest, onHeaders?: (h: Record<string, string | string[] | undefined>) => void) =>
            fetchInput(client, url, into, {
              ...o,
              signal,
              onBytes,
              onHeaders,
              onReplica: (pfn) => (replica = pfn),
              onChecksum: (c) => (sum = c),
            });
        // The input cache (cache/): one download per URL for the site, a link or copy for the job.
        ({ bytes: size, fromCache } = await transfer(ctx, job, ac, slots, `download ${f.name}`, scheme, (signal, onBytes) =>
          cachedDownload(ctx, cache, { job, desc, file: f, client, dest, signal, download: get(signal, onBytes) }),
        ));
      } finally {
        await dir.close();
      }
      await appendInputs(ctx.control, job.id, [f.name]);
      await ctx.control.append(
        job.id,
        "statistics",
        `inputfile:url=${redact(url)},size=${size},starttime=${utcStamp(start)},endtime=${utcStamp()},fromcache=${fromCache ? "yes" : "no"}`,
      );
      ctx.metrics?.countStagingFile("in", fromCache ? "cache" : scheme);
      await logErrors(
        ctx,
        job.id,
        `Staging: ${fromCache ? "from the cache:" : "downloaded"} ${redact(url)} -> /${f.name} (${fileFacts({ replica, bytes: size, checksum: sum, start })})`,
      );
    } catch (e) {
      if (ac.signal.aborted) return;
      // Redis trouble (the credential lookup) is not the file's fault: the whole stage-in is redone after it.
      if (redisTrouble(e)) throw e;
      const msg = `${f.name}: ${refusalText(e)}`;
      await logErrors(ctx, job.id, `Staging: download of ${redact(url)} failed: ${refusalText(e)}`);
      if (f.options.failureallowed === "yes") return;
      failures.push(msg);
      blames.push(blameOf(e));
      ac.abort(); // a failed mandatory download cancels the job's other transfers (as on A-REX)
    }
  });
  if (failures.length > 0) {
    log.warn({ failures }, "stage-in failed");
    await writePrivate(ctx, job.id, "stagein.failed", JSON.stringify({ text: failures.join("; "), cause: blameAll(blames) }));
    ctx.aborts.delete(job.id);
    await enqueueAdvance(ctx, job.id, "staged-in", 0, job.requestId);
  } else if (!ac.signal.aborted) log.info("stage-in finished");
}

async function stageOut(ctx: JemContext, job: JobRecord, ac: AbortController, clientFor: ClientFor, slots: FairSlots): Promise<void> {
  const desc = await readSpec(ctx, job.id);
  const session = ctx.control.sessionDir(job.id);
  const failures: string[] = [];
  const blames: Blame[] = [];
  /** A file the JEM will not read on the job's behalf (missing, a link…): the job's doing. */
  const refuse = async (reason: string, optional = false) => {
    await logErrors(ctx, job.id, `Staging: output not uploaded, ${reason}`);
    if (!optional) {
      failures.push(reason);
      blames.push("user");
    }
  };
  if (desc) {
    const plan = await outputPlan(session, desc, outcomeOf(job), job.rerun, ctx.config.staging.maxOutputListLines);
    const removed = await purgeSession(session, plan);
    const log = jobLog(ctx, job);
    log.info({ removed, uploads: plan.uploads.length }, "stage-out started");
    for (const r of plan.refused) await refuse(r);
    const sent = outputStatusNames((await ctx.control.read(job.id, "output_status")) ?? "");
    // Directory outputs become one upload per file; `dir/` + target collection URL.
    const items: Array<{
      name: string;
      url: string;
      delegationId?: string | undefined;
      optional: boolean;
      options: Record<string, string>;
    }> = [];
    for (const u of plan.uploads) {
      const optional = u.options.failureallowed === "yes";
      if (u.name.endsWith("/")) {
        const base = u.target.endsWith("/") ? u.target : `${u.target}/`;
        const dir = u.name.replace(/\/+$/, "");
        const { files, refused } = await filesUnder(session, dir);
        for (const r of refused) await refuse(r, optional);
        for (const f of files)
          items.push({
            name: f,
            url: base + encodeURI(f.slice(dir.length + 1)),
            delegationId: u.delegationId,
            optional,
            options: u.options,
          });
      } else {
        const url = u.target.endsWith("/") ? u.target + encodeURIComponent(u.name.split("/").pop()!) : u.target;
        items.push({ name: u.name, url, delegationId: u.delegationId, optional, options: u.options });
      }
    }
    await mapLimit(
      items.filter((i) => !sent.has(i.name)),
      PER_JOB,
      async (i) => {
        if (ac.signal.aborted) return;
        const start = new Date();
        const scheme = schemeOf(i.url);
        try {
          const segs = sessionSegments(i.name);
          // The descriptor checked here is the one streamed: a swap after the check changes nothing.
          const { handle, stat } = await openRegular(session, segs, { refuseHardLinks: true });
          let size: number;
          let sum: string | undefined;
          try {
            const client = await clientFor(i.delegationId ?? desc.delegationId);
            ({ bytes: size, checksum: sum } = await transfer(ctx, job, ac, slots, `upload ${i.name}`, scheme, (signal) =>
              sendOutput(client, { handle, size: stat.size }, i.url, { signal, options: i.options }),
            ));
            ctx.metrics?.addStagingBytes("out", size, scheme);
          } finally {
            await closeHandle(handle, `/${i.name}`);
          }
          await ctx.control.append(job.id, "output_status", outputStatusLine(i.name, i.url, sum));
          await ctx.control.append(
            job.id,
            "statistics",
            `outputfile:url=${redact(i.url)},size=${size},starttime=${utcStamp(start)},endtime=${utcStamp()}`,
          );
          ctx.metrics?.countStagingFile("out", scheme);
          await logErrors(
            ctx,
            job.id,
            `Staging: uploaded /${i.name} -> ${redact(i.url)} (${fileFacts({ bytes: size, checksum: sum, start })})`,
          );
          // Uploaded copies leave the session dir (as on A-REX): the entry itself, never a target.
          await removePath(session, segs).catch(() => undefined);
        } catch (e) {
          if (ac.signal.aborted) return;
          if (redisTrouble(e)) throw e; // redone after the outage, like stage-in
          await logErrors(ctx, job.id, `Staging: upload of /${i.name} to ${redact(i.url)} failed: ${refusalText(e)}`);
          if (!i.optional) {
            failures.push(`${i.name}: ${refusalText(e)}`);
            blames.push(blameOf(e));
          }
        }
      },
    );
    log.info({ failures: failures.length }, "stage-out finished");
  }
  if (!ac.signal.aborted) await writePrivate(ctx, job.id, "stageout.done", JSON.stringify({ failures, cause: blameAll(blames) }));
}
