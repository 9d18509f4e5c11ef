import { openTarget as openShared, type Target } from "@ce/sessionfs";

/**
 * Symlink-safe access to a job's session directory: the one implementation shared with the JEM
 * lives in `@ce/sessionfs` (component-by-component `O_NOFOLLOW` opens through `/proc/self/fd`,
 * regular files only, iterative deletion). The gateway also refuses hard links when reading: a
 * job could hard-link a file it reached elsewhere and have the owner download it here.
 */
export { Dir, listEntries, openForWrite, removePath, SessionFsError, type Entry, type FsErrorKind, type Target } from "@ce/sessionfs";

/** Opens a directory (for listings) or a regular file with one link for reading. Caller closes. */
export function openTarget(root: string, segments: readonly string[]): Promise<Target> {
  return openShared(root, segments, { refuseHardLinks: true });
}
