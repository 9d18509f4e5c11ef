/**
 * Session transfer (E6): the one module an upload or a download passes through. README.md here
 * traces both step by step. Routes import from this file only.
 */
export { deleteEntry, propfindEntry, putFile, readEntry, type ReadResult } from "./operations.js";
export { jobWithSession, ownedJob } from "./job.js";
export { parseSessionPath, rawTargetPath, type SessionPath } from "./path.js";
export { fileResponse } from "./download.js";
export { archiveResponse } from "./archive.js";
// For the HTML pages (pages/job.tsx, pages/session.tsx) and the router (app.ts).
export { listCapped, ListingTooLarge } from "./propfind.js";
export { openTarget, SessionFsError, type Entry } from "./fs.js";
export { hrefFor, resolveDotSegments } from "./path.js";
// For the runtime-internals switches (runtime-internals.ts).
export { useAlignedMemory } from "./buffers.js";
export { useParserIntake } from "./intake.js";
