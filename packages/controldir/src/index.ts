export * from "./controldir.js";
export * from "./protocol.js";
export * from "./inputstatus.js";
export * from "./jobfiles.js";
export * from "./writers.js";
export * from "./node-capability.js";
export { FileQueue, fileq, type FsOp, type FsResult, type ResultOf, type ResultsOf } from "./files.js";
export { ThreadHost, workerEntry, type WorkerEntry } from "./threadhost.js";
