/** Shared GLUE2 constants and identifier/time helpers for the info and activity documents. */

export const GLUE2_NS = "http://schemas.ogf.org/glue/2009/03/spec_2.0_r1";

/** The REST interface name ARC clients select the endpoint by. */
export const ARCREST_INTERFACE = "org.nordugrid.arcrest";

/**
 * GLUE2 time, exactly `YYYY-MM-DDTHH:MM:SSZ` (UTC, no fraction): pyarcrest strptime()s it with that
 * pattern and one bad timestamp breaks a whole bulk call (decisions #17).
 */
export function glueTime(d: Date): string {
  const s = glueTimeOpt(d);
  if (s !== undefined) return s;
  if (!Number.isFinite(d.getTime())) throw new RangeError("glueTime: invalid Date");
  throw new RangeError(`glueTime: year ${d.getUTCFullYear()} out of range`);
}

/**
 * The text of each second, made once: a bulk info answer formats several times per document (the
 * request time, submission times shared by a batch, proxy expiry ...), and toISOString was most
 * of building the documents. Bounded: emptied when full.
 */
const secondTexts = new Map<number, string>();
const SECOND_TEXTS_MAX = 4096;

/** glueTime, or undefined for an absent/invalid date or a year outside 0-9999 (the element is then omitted). */
export function glueTimeOpt(d: Date | null | undefined): string | undefined {
  if (!d) return undefined;
  const t = d.getTime();
  // A NaN second is never stored, so an invalid date always reaches the check below.
  const sec = Math.floor(t / 1000);
  const known = secondTexts.get(sec);
  if (known !== undefined) return known;
  if (!Number.isFinite(t)) return undefined;
  const y = d.getUTCFullYear();
  if (y < 0 || y > 9999) return undefined;
  const s = d.toISOString().slice(0, 19) + "Z";
  if (secondTexts.size >= SECOND_TEXTS_MAX) secondTexts.clear();
  secondTexts.set(sec, s);
  return s;
}

export const glueIds = {
  adminDomain: (name: string) => `urn:ad:${name}`,
  service: (host: string) => `urn:ogf:ComputingService:${host}:arex`,
  endpoint: (host: string, url: string) => `urn:ogf:ComputingEndpoint:${host}:rest:${url}`,
  share: (host: string, queue: string) => `urn:ogf:ComputingShare:${host}:${queue}`,
  manager: (host: string, lrms: string) => `urn:ogf:ComputingManager:${host}:${lrms}`,
  executionEnvironment: (host: string, name: string) => `urn:ogf:ExecutionEnvironment:${host}:${name}`,
  applicationEnvironment: (host: string, i: number) => `urn:ogf:ApplicationEnvironment:${host}:rte:${i}`,
  accessPolicy: (host: string) => `urn:ogf:AccessPolicy:${host}:rest`,
  mappingPolicy: (host: string, queue: string) => `urn:ogf:MappingPolicy:${host}:${queue}`,
  shareAccelerator: (host: string, share: string, type: string) => `urn:ogf:ComputingShareAcceleratorInfo:${host}:${share}:${type}`,
  benchmark: (host: string, queue: string, type: string) => `urn:ogf:Benchmark:${host}:${queue}:${type}`,
  activity: (host: string, id: string, iface: string = ARCREST_INTERFACE) => `urn:caid:${host}:${iface}:${id}`,
  idFromEndpoint: (id: string) => `urn:idfe:${id}`,
};

/**
 * Name of a queue's share for one VO, `<queue>_<vo>` with the VO lower-cased: DIRAC takes the first
 * share whose ID ends in `<queue>_<vo in lower case>`.
 */
export function voShareName(queue: string, vo: string): string {
  return `${queue}_${vo.toLowerCase()}`;
}

/**
 * Split a runtime-environment name into AppName/AppVersion at the first `-` followed by a digit
 * (the rule of A-REX RTEInfo.pm and Arc::Software): `APPS/X-1.2-a` → `APPS/X` + `1.2-a`.
 */
export function splitRteName(rte: string): { appName: string; appVersion?: string } {
  const m = /-(?=\d)/.exec(rte);
  if (!m || m.index === 0) return { appName: rte };
  return { appName: rte.slice(0, m.index), appVersion: rte.slice(m.index + 1) };
}

/** Service endpoint URL as published (no trailing slash, no `/rest[/<version>]` suffix). */
export function publishedEndpointUrl(url: string): string {
  let u = url.replace(/\/+$/, "");
  u = u.replace(/\/rest(?:\/\d+\.\d+)?$/, "");
  return u.replace(/\/+$/, "");
}
