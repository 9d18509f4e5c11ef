/**
 * The job's side of the deletion race (tests/security/deletion-race.test.ts), in a process of its
 * own so that it runs while the JEM deletes. `fill` creates a directory of many files; `arm`
 * watches it (inotify) and, on the first entry the deleter removes, renames the directory away
 * and puts a symlink to the victim in its place: what a job's account can do in its batch dir `<session>.lrms`.
 */
import { mkdirSync, renameSync, symlinkSync, watch, writeFileSync } from "node:fs";

type Msg = { fill: string; names: string[]; pad: number } | { arm: string; victim: string };

const reply = (m: unknown) => process.send!(m);

process.on("message", (m: Msg) => {
  if ("fill" in m) {
    try {
      mkdirSync(m.fill, { recursive: true });
      for (const n of m.names) writeFileSync(`${m.fill}/${n}`, "job");
      for (let i = 0; i < m.pad; i++) writeFileSync(`${m.fill}/p${String(i).padStart(6, "0")}`, "");
      reply({ filled: true });
    } catch (e) {
      // The JEM removed the job's files while they were being made: this round has no attack.
      reply({ filled: false, error: String(e) });
    }
    return;
  }
  let done = false;
  const w = watch(m.arm, () => {
    if (done) return;
    done = true;
    w.close();
    try {
      renameSync(m.arm, `${m.arm}.moved`);
      symlinkSync(m.victim, m.arm);
      reply({ swapped: true });
    } catch (e) {
      // The deleter was faster than the swap (or refused the tree first): no attack this round.
      reply({ swapped: false, error: String(e) });
    }
  });
  reply({ armed: m.arm });
});
