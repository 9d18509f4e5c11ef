/**
 * How the advance loop sleeps: until a timeout or a ring, whichever comes first. A ring while the
 * loop is awake (mid-turn: a pub/sub bell, a look ending) is kept for the next sleep, which then
 * returns at once, so no ring is lost between a turn's claim and its sleep.
 */
export class Doorbell {
  private wake: (() => void) | undefined;
  private rung = false;

  ring(): void {
    const w = this.wake;
    this.wake = undefined;
    if (w) w();
    else this.rung = true;
  }

  sleep(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      if (this.rung) {
        this.rung = false;
        resolve();
        return;
      }
      const t = setTimeout(() => {
        this.wake = undefined;
        resolve();
      }, ms);
      this.wake = () => {
        clearTimeout(t);
        resolve();
      };
    });
  }
}
