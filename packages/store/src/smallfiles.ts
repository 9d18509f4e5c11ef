import fs from "node:fs";
import { promisify } from "node:util";

/**
 * Small control files are read and written through Node's callback API, promisified. Node's
 * `fs/promises` wraps every call in a FileHandle and reads in a stat + chunk loop: a `readFile`
 * of a tiny file costs several times the CPU that way, an append about twice. A job's state change reads
 * and writes several such files, so this is most of the JEM's cost per job. Same semantics
 * (async, threadpool), only cheaper. Large or streamed files keep using file handles.
 */
export const readSmall = promisify(fs.readFile) as (path: string, encoding: "utf8") => Promise<string>;
export const writeSmall = promisify(fs.writeFile) as (path: string, data: string, opts: { mode: number; flag?: string }) => Promise<void>;
export const appendSmall = promisify(fs.appendFile) as (path: string, data: string, opts: { mode: number }) => Promise<void>;
export const renameSmall = promisify(fs.rename);
const unlinkCb = promisify(fs.unlink);

/**
 * Removes one file; a missing one is not an error. `fs/promises.rm({ force: true })` goes through
 * its rimraf path (lstat, then unlink, each a FileHandle-era promise): ~3× the CPU for a file.
 */
export async function unlinkSmall(path: string): Promise<void> {
  try {
    await unlinkCb(path);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e;
  }
}
