/**
 * Recovery for an `ActivityDescriptions` bundle that is not well-formed as a whole: its
 * `ActivityDescription` children are cut out by their tags and read one by one, so one broken
 * description costs only its own item (docs/decisions.md #20). Used only after the strict read failed.
 * Every search moves forward through the text, so the work stays linear in its length.
 */

export interface BundlePart {
  /** The part's text with the root's namespace declarations added to its start tag. */
  text: string;
  start: number;
  end: number;
}

const ROOT = /^\s*(?:<\?[^>]{0,1024}\?>\s*)?<((?:[\w.-]{1,64}:)?ActivityDescriptions)([\s/>])/;
const NS_DECL = /\s(xmlns(?::[\w.-]+)?)\s*=\s*("[^"]*"|'[^']*')/g;
const NAME = "ActivityDescription";

/** First index of `needle` at or after a position; positions must not decrease between calls. */
class Finder {
  private from = -1;
  private found = -1;
  constructor(
    private readonly text: string,
    private readonly needle: string,
  ) {}

  at(pos: number): number {
    const valid = this.from >= 0 && this.from <= pos && (this.found === -1 || this.found >= pos);
    if (!valid) {
      this.from = pos;
      this.found = this.text.indexOf(this.needle, pos);
    }
    return this.found;
  }
}

/** The parts of a bundle, or undefined when the text does not even start like one. */
export function splitBundle(text: string, maxParts: number): BundlePart[] | undefined {
  const root = ROOT.exec(text);
  if (!root) return undefined;
  const names = new Finder(text, NAME);
  const gts = new Finder(text, ">");
  const rootGt = gts.at(root[0].length - 1);
  if (rootGt < 0) return undefined;
  const rootDecls = [...text.slice(root[0].length - 1, rootGt).matchAll(NS_DECL)].map((m) => [m[1] as string, m[2] as string] as const);
  const closers = new Map<string, Finder>();

  /** The next start tag `<[prefix:]ActivityDescription` at or after `pos`. */
  const nextStart = (pos: number): { lt: number; qname: string } | undefined => {
    for (let at = names.at(pos); at >= 0; at = names.at(at + 1)) {
      const after = text[at + NAME.length];
      if (after !== undefined && !/[\s/>]/.test(after)) continue;
      const head = /<([\w.-]{1,64}:)?$/.exec(text.slice(Math.max(pos, at - 66), at));
      if (head) return { lt: at - head[0].length, qname: `${head[1] ?? ""}${NAME}` };
    }
    return undefined;
  };

  const parts: BundlePart[] = [];
  for (let s = nextStart(rootGt + 1); s && parts.length < maxParts;) {
    const gt = gts.at(s.lt);
    if (gt < 0) {
      parts.push({ text: text.slice(s.lt), start: s.lt, end: text.length });
      break;
    }
    const selfClosing = text[gt - 1] === "/";
    let end = gt + 1;
    const next = nextStart(end);
    if (!selfClosing) {
      let closer = closers.get(s.qname);
      if (!closer) closers.set(s.qname, (closer = new Finder(text, `</${s.qname}`)));
      const close = closer.at(end);
      const closeGt = close < 0 ? -1 : gts.at(close);
      // Unterminated: the part runs up to the next description (or the end).
      const limit = next ? next.lt : text.length;
      end = closeGt >= 0 && closeGt < limit ? closeGt + 1 : limit;
    }
    const startTag = text.slice(s.lt, gt);
    const own = new Set([...startTag.matchAll(NS_DECL)].map((d) => d[1]));
    const extra = rootDecls
      .filter(([k]) => !own.has(k))
      .map(([k, v]) => ` ${k}=${v}`)
      .join("");
    const slice = text.slice(s.lt, end);
    parts.push({ text: `<${s.qname}${extra}${slice.slice(s.qname.length + 1)}`, start: s.lt, end });
    s = next && next.lt >= end ? next : nextStart(end);
  }
  return parts;
}
