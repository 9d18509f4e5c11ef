/**
 * Session-directory path safety. Every file name a job description (or a session-file request)
 * mentions is normalized here, and anything that could leave the session directory is refused.
 */

/**
 * Normalizes a path relative to the session directory: collapses `//` and `./`, resolves inner
 * `..`, keeps a trailing `/` (directory outputs). Returns `""` for the session directory itself
 * and `undefined` for a path that is absolute, contains NUL, or escapes via `..`.
 */
export function normalizeSessionPath(p: string): string | undefined {
  if (p.includes("\0") || p.startsWith("/")) return undefined;
  const parts: string[] = [];
  for (const seg of p.split("/")) {
    if (seg === "" || seg === ".") continue;
    if (seg === "..") {
      if (parts.length === 0) return undefined;
      parts.pop();
      continue;
    }
    parts.push(seg);
  }
  const joined = parts.join("/");
  return joined !== "" && p.endsWith("/") ? `${joined}/` : joined;
}
