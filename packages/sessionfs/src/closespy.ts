import fs from "node:fs";
import { syncBuiltinESMExports } from "node:module";

/**
 * Test aid: watches every `fs.closeSync`/`fs.close` of this thread (ESM named imports included,
 * through syncBuiltinESMExports). After each close it can open /dev/null right away, as another
 * thread would, so the number just released is held by a "bystander"; a later close of that
 * number is a close of a descriptor the caller no longer owned, and is recorded. EBADF from any
 * close is recorded too (a double close without a bystander).
 */
export interface CloseSpy {
  /** Closes of a number a bystander held: the double close closed someone else's file. */
  stolen: number[];
  /** EBADF from close (a number closed twice with nobody in between). */
  ebadf: number[];
  /** Called after each successful close by the code under test. */
  afterClose?: (fd: number) => void;
  restore(): void;
}

export function spyOnClose(opts: { bystanders: boolean }): CloseSpy {
  const origSync = fs.closeSync;
  const orig = fs.close;
  const held = new Set<number>();
  const spy: CloseSpy = {
    stolen: [],
    ebadf: [],
    restore() {
      fs.closeSync = origSync;
      fs.close = orig;
      syncBuiltinESMExports();
      for (const fd of held) origSync(fd);
      held.clear();
    },
  };
  const before = (fd: number) => {
    if (held.delete(fd)) spy.stolen.push(fd);
  };
  const after = (fd: number) => {
    if (opts.bystanders) held.add(fs.openSync("/dev/null", "r"));
    spy.afterClose?.(fd);
  };
  fs.closeSync = (fd: number) => {
    before(fd);
    try {
      origSync(fd);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === "EBADF") spy.ebadf.push(fd);
      throw e;
    }
    after(fd);
  };
  fs.close = ((fd: number, cb?: (err: NodeJS.ErrnoException | null) => void) => {
    before(fd);
    orig(fd, (err) => {
      if (err?.code === "EBADF") spy.ebadf.push(fd);
      else if (!err) after(fd);
      cb?.(err);
    });
  }) as typeof fs.close;
  syncBuiltinESMExports();
  return spy;
}
