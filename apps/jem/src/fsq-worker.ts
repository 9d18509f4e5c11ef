import { serveThread } from "@ce/store/threadhost";
import { runGroup, type FsOp, type GroupOut } from "./priv/rootfs-ops.js";

/** The JEM's file thread (fsq.ts): each request is the groups of one turn of the event loop. */
serveThread<ReadonlyArray<readonly FsOp[]>, GroupOut[]>((groups) => groups.map(runGroup));
