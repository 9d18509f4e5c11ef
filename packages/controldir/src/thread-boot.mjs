// Entry of a worker thread started from the TypeScript sources (threadhost.ts): Node 20 does not
// carry the parent's `--import tsx` hooks into a worker, so the worker module is loaded through
// tsx's API. A built app starts its bundled `.js` workers directly and never loads this file.
import { workerData } from "node:worker_threads";
import { tsImport } from "tsx/esm/api";

await tsImport(workerData.entry, import.meta.url);
