import { runGroup, type FsOp, type GroupOut } from "./ops.js";
import { serveThread } from "./threadhost.js";

/**
 * The file thread (files.ts): each request is the groups of one turn of the event loop, each
 * group's operations in order, stopping at its first failure (ops.ts).
 */
serveThread<ReadonlyArray<readonly FsOp[]>, GroupOut[]>((groups) => groups.map(runGroup));
