export { Dir, openParent, segmentsOf, SessionFsError, type FsErrorKind } from "./dir.js";
export { closeHandle, FdClosedError, FdError, FdStolenError, numOf, onFdStolen, OwnedFd } from "./fd.js";
export {
  createFileIn,
  listEntries,
  openFileIn,
  openForWrite,
  openRegular,
  openTarget,
  readSmallFile,
  replaceFileIn,
  type Entry,
  type OpenOptions,
  type Target,
} from "./open.js";
export { removeEntry, removePath, unlinkNonDir, walkFiles, type WalkResult } from "./tree.js";
export { handOverTree, type HandOverOptions, type HandOverReport } from "./handover.js";
