/**
 * Inputs that name a file on a site-shared, read-only file system (a software area such as
 * `/cvmfs/atlas.cern.ch/...`). Only prefixes the site lists (`staging.localInputPrefixes`) are
 * allowed; the gateway checks at submission and the JEM checks again before it links the file.
 */

const FORBIDDEN = /[\0-\x1f\x7f?#%\\]/;

/** `/a/b` or `file:///a/b` (`file://localhost/a/b`) → the absolute path; undefined if not local. */
export function localSourcePath(source: string): string | undefined {
  if (source.startsWith("/")) return source;
  const m = /^file:(?:\/\/(localhost)?(?=\/))?(\/.*)$/i.exec(source);
  if (m) return m[2];
  // `file://host/...` names another machine: report it as local so it is refused, not fetched.
  if (/^file:/i.test(source)) return "";
  return undefined;
}

/** A prefix as written by the site, without trailing slashes ("/" itself is never a software area). */
function cleanPrefix(p: string): string {
  return p.replace(/\/+$/, "");
}

/**
 * The canonical path of a local input if it lies under one of `prefixes`, else a reason. `..`, `.`
 * and characters that would change meaning in a URL are refused rather than resolved.
 */
export function checkLocalInput(path: string, prefixes: readonly string[]): { path: string } | { reason: string } {
  if (path === "" || !path.startsWith("/")) return { reason: "only local paths on this machine (file:///path) can be used" };
  if (FORBIDDEN.test(path)) return { reason: "contains characters not allowed in a local input path" };
  const segs = path.split("/").filter((s) => s !== "");
  if (segs.some((s) => s === "." || s === "..")) return { reason: "must not contain '.' or '..' components" };
  const canonical = `/${segs.join("/")}`;
  const listed = prefixes.map(cleanPrefix).filter((p) => p.startsWith("/") && p !== "");
  if (!listed.some((p) => canonical.startsWith(`${p}/`))) {
    return {
      reason:
        listed.length === 0
          ? "local paths are not allowed on this computing element; upload the file instead"
          : `is not under a software area this site shares with jobs (${listed.join(", ")}); upload the file instead`,
    };
  }
  return { path: canonical };
}
