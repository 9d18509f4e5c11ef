/**
 * Colour for a person at a terminal, never for a pipe or a file: only when stdout is a TTY, and
 * never with NO_COLOR set (https://no-color.org) or TERM=dumb. Applied after columns are
 * aligned, so escape codes never count as width.
 */
export function colourWanted(stream: { isTTY?: boolean } = process.stdout, env: NodeJS.ProcessEnv = process.env): boolean {
  return stream.isTTY === true && !env.NO_COLOR && env.TERM !== "dumb";
}

const CODES = { bold: "1", red: "31", green: "32", yellow: "33", blue: "34", dim: "2" } as const;
export type Colour = keyof typeof CODES;

export const paint = (on: boolean, c: Colour | undefined, s: string) => (on && c ? `\x1b[${CODES[c]}m${s}\x1b[0m` : s);

/** The colour of a REST or internal state name in a table. */
export function stateColour(state: string): Colour | undefined {
  if (/^(FAILED|KILLED)$/.test(state)) return "red";
  if (/^(FINISHED)$/.test(state)) return "green";
  if (/^(RUNNING|QUEUING|INLRMS)$/.test(state)) return "blue";
  if (/^(WIPED|DELETED)$/.test(state)) return "dim";
  return undefined;
}
