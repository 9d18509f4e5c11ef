import type { InputFile, JobDescription } from "@ce/model";
import type { JobRecord } from "@ce/store";
import type { JemContext } from "../../context.js";
import type { SessionPlace } from "../../priv/rootfs-cache.js";
import type { TransferClient } from "../http.js";
import { InputCache, type FetchResult } from "./cache.js";
import { cacheModeOf, cacheTarget } from "./policy.js";

export { InputCache, CacheRefused } from "./cache.js";
export { CacheOptionError, cacheModeOf, cacheTarget, urlHash, type CacheMode, type CacheTarget } from "./policy.js";

/** The input cache of this JEM, or undefined when none is configured or usable (logged). */
export function openInputCache(ctx: JemContext): Promise<InputCache | undefined> {
  if (ctx.config.staging.cache.dirs.length === 0) return Promise.resolve(undefined);
  return InputCache.open(ctx).catch((e: unknown) => {
    ctx.log.error({ err: e, reason: (e as Error).message }, "input cache unusable; inputs are downloaded for each job");
    return undefined;
  });
}

export interface CachedDownload {
  job: JobRecord;
  desc: JobDescription;
  file: InputFile;
  client: TransferClient;
  dest: SessionPlace;
  signal: AbortSignal;
  /** The plain download into a place (protocol code of the worker). */
  download(into: SessionPlace, onHeaders?: (h: Record<string, string | string[] | undefined>) => void): Promise<number>;
}

/** One input: through the cache when its `cache=` mode and the site allow, else a plain download. */
export async function cachedDownload(ctx: JemContext, cache: InputCache | undefined, d: CachedDownload): Promise<FetchResult> {
  const mode = cacheModeOf(d.file, ctx.config);
  if (!cache || mode === "no") return { bytes: await d.download(d.dest), fromCache: false };
  // An input that is also an output must not be a link (outputs are never read through one).
  const copy = d.desc.outputFiles.some((o) => o.name.replace(/\/+$/, "") === d.file.name);
  const target = cacheTarget(d.file.source!, d.file.options);
  return cache.fetch({
    job: d.job,
    url: d.file.source!,
    target,
    mode,
    client: d.client,
    dest: d.dest,
    signal: d.signal,
    executable: d.file.executable,
    copy,
    download: d.download,
  });
}
