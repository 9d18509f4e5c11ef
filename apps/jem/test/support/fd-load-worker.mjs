// A file thread under load for fd-threads.test.ts: writes (temporary name + rename) and reads its
// own files in a loop with plain descriptors, as the JEM's file thread does, and checks each
// descriptor before closing it: still open, and still the file it opened. A close elsewhere in
// the process of a number this thread holds shows up here as EBADF or as another file's inode.
import fs from "node:fs";
import { join } from "node:path";
import { parentPort, workerData } from "node:worker_threads";

const { dir, ms } = workerData;
const C = fs.constants;
const out = { ops: 0, ebadf: 0, wrongFile: 0, wrongBytes: 0, errors: [] };
const note = (e) => {
  if (e?.code === "EBADF") out.ebadf++;
  else if (out.errors.length < 5) out.errors.push(String(e?.message ?? e));
};

function checkedClose(fd, path) {
  try {
    const st = fs.fstatSync(fd);
    if (st.ino !== fs.lstatSync(path).ino) out.wrongFile++;
  } catch (e) {
    note(e);
  }
  try {
    fs.closeSync(fd);
  } catch (e) {
    note(e);
  }
}

const end = Date.now() + ms;
for (let i = 0; Date.now() < end; i++) {
  const path = join(dir, `f${i % 16}`);
  const body = `${path}:${i}`;
  try {
    const tmp = `${path}.tmp`;
    const w = fs.openSync(tmp, C.O_WRONLY | C.O_CREAT | C.O_TRUNC | C.O_NOFOLLOW, 0o600);
    fs.writeSync(w, body);
    checkedClose(w, tmp);
    fs.renameSync(tmp, path);
    const r = fs.openSync(path, C.O_RDONLY | C.O_NOFOLLOW);
    const buf = Buffer.alloc(body.length + 16);
    const n = fs.readSync(r, buf, 0, buf.length, 0);
    if (buf.toString("utf8", 0, n) !== body) out.wrongBytes++;
    checkedClose(r, path);
    out.ops++;
  } catch (e) {
    note(e);
  }
  // Let the other threads' closes land between ours.
  if (i % 64 === 0) await new Promise((r) => setImmediate(r));
}
parentPort.postMessage(out);
