/**
 * Recursive-descent parser for the (x)RSL grammar as the ARC clients write it. It only builds the syntax
 * tree; variables, alternatives and attribute meaning are handled in evaluate.ts / attributes.ts.
 */
import { DescriptionError, XrslSyntaxError, positionAt } from "../../errors.js";
import { DESCRIPTION_LIMITS, isBodyLimit, limitError, type DescriptionLimits } from "../limits.js";
import {
  normalizeAttributeName,
  type RelationOperator,
  type RslBoolean,
  type RslConcat,
  type RslLiteral,
  type RslNode,
  type RslRelation,
  type RslSequence,
  type RslValue,
  type RslVariable,
} from "./ast.js";

/** Characters that end a bare word (besides whitespace). */
const SPECIAL = new Set(["+", "&", "|", "(", ")", "=", "<", ">", "!", '"', "'", "^", "#", "$"]);
const OPERATORS: RelationOperator[] = ["!=", "<=", ">=", "=", "<", ">"];
/** Deeper nesting is certainly not a real job and would only exhaust the stack. */
export const MAX_RSL_DEPTH = DESCRIPTION_LIMITS.maxDepth;

/** One job of a body: its tree, or the error that made it unreadable, and its span in the text. */
export type RslJob = { node: RslNode; start: number; end: number } | { error: DescriptionError; start: number; end: number };

function isSpace(c: string): boolean {
  return c === " " || c === "\t" || c === "\n" || c === "\r" || c === "\f" || c === "\v";
}

function describe(c: string | undefined): string {
  return c === undefined ? "end of text" : `'${c}'`;
}

class RslParser {
  private pos = 0;
  private depth = 0;
  private nodes = 0;
  constructor(
    private readonly text: string,
    private readonly limits: DescriptionLimits = DESCRIPTION_LIMITS,
  ) {}

  /**
   * The jobs of a body. A `+` part that does not parse becomes a failed job and the parser
   * resumes after its closing parenthesis, so the other parts are still read; only the body-wide
   * caps (number of descriptions, syntax nodes) throw.
   */
  parseJobs(): RslJob[] {
    this.skipSpace();
    if (this.peek() !== "+") return [this.settle(0, () => this.parseDocument())];
    this.pos++;
    this.skipSpace();
    const jobs: RslJob[] = [];
    while (this.peek() === "(") {
      if (jobs.length >= this.limits.maxDescriptions) {
        this.limit("maxDescriptions", `more than ${this.limits.maxDescriptions} descriptions in one request`);
      }
      const start = this.pos;
      jobs.push(this.settle(start, () => this.parseGroup()));
      this.skipSpace();
    }
    if (jobs.length === 0 || this.pos < this.text.length) {
      const start = this.pos;
      jobs.push(
        this.settle(start, () =>
          this.fail(
            jobs.length === 0
              ? "expected '(' after '+'"
              : `Junk at end of RSL: unexpected ${describe(this.peek())} after the last description`,
          ),
        ),
      );
      this.pos = this.text.length;
    }
    return jobs;
  }

  private settle(start: number, parse: () => RslNode): RslJob {
    try {
      const node = parse();
      return { node, start, end: this.pos };
    } catch (e) {
      if (!(e instanceof DescriptionError) || isBodyLimit(e)) throw e;
      this.depth = 0;
      this.pos = skipBalanced(this.text, start);
      return { error: e, start, end: this.pos };
    }
  }

  private limit(limit: keyof DescriptionLimits, detail: string): never {
    throw limitError(limit, this.limits[limit], detail, positionAt(this.text, this.pos));
  }

  private count(): void {
    if (++this.nodes > this.limits.maxNodes)
      this.limit("maxNodes", `more than ${this.limits.maxNodes} relations and values in one request`);
  }

  parseDocument(): RslNode {
    this.skipSpace();
    const c = this.peek();
    let node: RslNode;
    if (c === undefined) this.fail("the description is empty");
    if (c === "&" || c === "|" || c === "+") {
      node = this.parseBoolean(true);
    } else if (c === "(") {
      // Lenient: `(a=b)(c=d)` without a leading operator is read as `&(a=b)(c=d)`.
      node = this.parseGroups("&", this.pos, false);
    } else {
      this.fail(`expected '&', '|' or '+' at the start of the description, found ${describe(c)}`);
    }
    this.skipSpace();
    if (this.pos < this.text.length) {
      this.fail(`Junk at end of RSL: unexpected ${describe(this.peek())} after the end of the description`);
    }
    return node;
  }

  private peek(offset = 0): string | undefined {
    return this.text[this.pos + offset];
  }

  private fail(detail: string, at: number = this.pos): never {
    throw new XrslSyntaxError(detail, positionAt(this.text, at));
  }

  /** Skips whitespace and `(* ... *)` comments (not nested). */
  private skipSpace(): void {
    for (;;) {
      const c = this.peek();
      if (c === undefined) return;
      if (isSpace(c)) {
        this.pos++;
      } else if (c === "(" && this.peek(1) === "*") {
        const close = this.text.indexOf("*)", this.pos + 2);
        if (close < 0) this.fail("unterminated comment: '(*' without a closing '*)'");
        this.pos = close + 2;
      } else {
        return;
      }
    }
  }

  private parseBoolean(topLevel: boolean): RslBoolean {
    const start = this.pos;
    const op = this.peek() as "&" | "|" | "+";
    if (op === "+" && !topLevel) this.fail("'+' (several jobs) is only allowed at the top level of the description");
    this.pos++;
    return this.parseGroups(op, start, true);
  }

  /** One or more `( ... )` groups following a boolean operator. */
  private parseGroups(op: "&" | "|" | "+", start: number, afterOperator: boolean): RslBoolean {
    const children: RslNode[] = [];
    this.skipSpace();
    while (this.peek() === "(") {
      if (children.length >= this.limits.maxListItems)
        this.limit("maxListItems", `more than ${this.limits.maxListItems} groups in one '${op}'`);
      children.push(this.parseGroup());
      this.skipSpace();
    }
    if (children.length === 0 && afterOperator) this.fail(`expected '(' after '${op}'`);
    const last = children[children.length - 1];
    return { kind: "boolean", op, children, start, end: last ? last.end : this.pos };
  }

  /** `( boolean )` or `( relation )`. */
  private parseGroup(): RslNode {
    const open = this.pos;
    this.enter();
    this.pos++;
    this.skipSpace();
    const c = this.peek();
    const node: RslNode = c === "&" || c === "|" || c === "+" ? this.parseBoolean(false) : this.parseRelation(open);
    this.skipSpace();
    if (this.peek() !== ")") {
      this.fail(
        node.kind === "relation"
          ? `expected ')' after value list, found ${describe(this.peek())}`
          : `expected ')' to close the group opened at line ${positionAt(this.text, open).line}, column ${positionAt(this.text, open).column}, found ${describe(this.peek())}`,
      );
    }
    this.pos++;
    if (node.kind === "relation") node.end = this.pos;
    this.depth--;
    return node;
  }

  private enter(): void {
    if (++this.depth > this.limits.maxDepth) {
      this.limit("maxDepth", `the description is nested more than ${this.limits.maxDepth} levels deep`);
    }
  }

  private parseRelation(open: number): RslRelation {
    const nameStart = this.pos;
    let rawAttribute: string;
    const q = this.peek();
    if (q === '"' || q === "'") {
      // ARC's parser takes a quoted attribute name (`("rerun" = "2")`, as aCT writes them).
      rawAttribute = this.parseQuoted(q).value;
      if (rawAttribute.trim() === "") this.fail("the quoted attribute name is empty", nameStart);
    } else {
      while (this.pos < this.text.length) {
        const c = this.text[this.pos] as string;
        if (isSpace(c) || SPECIAL.has(c)) break;
        this.pos++;
      }
      rawAttribute = this.text.slice(nameStart, this.pos);
    }
    if (rawAttribute === "") this.fail(`expected an attribute name, found ${describe(this.peek())}`);
    this.skipSpace();
    const op = OPERATORS.find((o) => this.text.startsWith(o, this.pos));
    if (!op) {
      this.fail(`expected an operator (=, !=, <, >, <=, >=) after attribute '${rawAttribute}', found ${describe(this.peek())}`);
    }
    this.pos += op.length;
    const values = this.parseValueList();
    this.count();
    const attribute = normalizeAttributeName(rawAttribute);
    return { kind: "relation", attribute, rawAttribute, op, values, start: open, end: this.pos };
  }

  /** Items up to (not including) the closing `)` or the end of text. */
  private parseValueList(): RslValue[] {
    const items: RslValue[] = [];
    for (;;) {
      this.skipSpace();
      const c = this.peek();
      if (c === undefined || c === ")") return items;
      if (items.length >= this.limits.maxListItems) this.limit("maxListItems", `more than ${this.limits.maxListItems} values in one list`);
      items.push(this.parseItem());
    }
  }

  private parseItem(): RslValue {
    if (this.peek() === "(") {
      const start = this.pos;
      this.enter();
      this.pos++;
      const items = this.parseValueList();
      if (this.peek() !== ")") this.fail(`expected ')' to close the value list, found ${describe(this.peek())}`);
      this.pos++;
      this.depth--;
      this.count();
      const seq: RslSequence = { kind: "sequence", items, start, end: this.pos };
      const save = this.pos;
      this.skipSpace();
      if (this.peek() === "#") this.fail("a parenthesised list cannot be concatenated with '#'");
      this.pos = save;
      return seq;
    }
    const parts: Array<RslLiteral | RslVariable> = [this.parseTerm()];
    for (;;) {
      const c = this.peek();
      if (c !== undefined && this.startsTerm(c)) {
        // Juxtaposition without whitespace concatenates (`$(DIR)/file`).
        parts.push(this.parseTerm());
        continue;
      }
      const save = this.pos;
      this.skipSpace();
      if (this.peek() === "#") {
        this.pos++;
        this.skipSpace();
        parts.push(this.parseTerm());
        continue;
      }
      this.pos = save;
      break;
    }
    if (parts.length === 1) return parts[0] as RslLiteral | RslVariable;
    const first = parts[0] as RslLiteral | RslVariable;
    const last = parts[parts.length - 1] as RslLiteral | RslVariable;
    const concat: RslConcat = { kind: "concat", parts, start: first.start, end: last.end };
    return concat;
  }

  private startsTerm(c: string): boolean {
    return c === '"' || c === "'" || c === "^" || c === "$" || (!isSpace(c) && !SPECIAL.has(c));
  }

  /** A string literal in one of its forms, or a `$(NAME)` variable reference. */
  private parseTerm(): RslLiteral | RslVariable {
    this.count();
    const start = this.pos;
    const c = this.peek();
    if (c === '"' || c === "'") return this.parseQuoted(c);
    if (c === "^") {
      const delim = this.peek(1);
      if (delim === undefined) this.fail("expected a delimiter character after '^'");
      const close = this.text.indexOf(delim, this.pos + 2);
      if (close < 0) this.fail(`unterminated string: no closing '${delim}' for '^${delim}'`, start);
      this.pos = close + 1;
      return { kind: "literal", value: this.text.slice(start + 2, close), start, end: this.pos };
    }
    if (c === "$") {
      this.pos++;
      this.skipSpace();
      if (this.peek() !== "(") this.fail("expected '(' after '$': variable references are written $(NAME)");
      this.pos++;
      this.skipSpace();
      const nameTerm = this.peek() === "$" || this.peek() === ")" ? undefined : this.parseTerm();
      if (!nameTerm || nameTerm.kind !== "literal" || nameTerm.value === "") {
        this.fail("expected a variable name inside $( )");
      }
      this.skipSpace();
      if (this.peek() !== ")") this.fail(`expected ')' after variable name '${nameTerm.value}', found ${describe(this.peek())}`);
      this.pos++;
      return { kind: "variable", name: nameTerm.value, start, end: this.pos };
    }
    while (this.pos < this.text.length) {
      const ch = this.text[this.pos] as string;
      if (isSpace(ch) || SPECIAL.has(ch)) break;
      this.pos++;
    }
    if (this.pos === start) {
      const hint = c === "=" || c === "<" || c === ">" || c === "!" ? " (is a ')' missing before it, or should the value be quoted?)" : "";
      this.fail(`expected a value, found ${describe(c)}${hint}`);
    }
    return { kind: "literal", value: this.text.slice(start, this.pos), start, end: this.pos };
  }

  /** `"..."` / `'...'`; a doubled quote character inside stands for one quote. */
  private parseQuoted(q: string): RslLiteral {
    const start = this.pos;
    const { text } = this;
    // One pass to the closing quote, then one replace: linear even for a text of only quotes.
    let i = start + 1;
    let doubled = false;
    for (;;) {
      i = text.indexOf(q, i);
      if (i < 0) this.fail(`unterminated quoted string: no closing ${q} for the one opened here`, start);
      if (text[i + 1] !== q) break;
      doubled = true;
      i += 2;
    }
    const raw = text.slice(start + 1, i);
    this.pos = i + 1;
    return { kind: "literal", value: doubled ? raw.replaceAll(q + q, q) : raw, start, end: this.pos };
  }
}

/** Parses RSL text into its syntax tree; throws `XrslSyntaxError` with a position on bad syntax. */
export function parseRsl(text: string, limits?: DescriptionLimits): RslNode {
  return new RslParser(text, limits).parseDocument();
}

/** The jobs of an RSL body, each parsed or failed on its own (see `RslParser.parseJobs`). */
export function parseRslJobs(text: string, limits?: DescriptionLimits): RslJob[] {
  return new RslParser(text, limits).parseJobs();
}

/**
 * The end of the parenthesised group opening at `start` (after its `)`), or the end of the text:
 * skips quoted strings, `^X…X` literals and `(* *)` comments, so a broken `+` part can be
 * stepped over without understanding it.
 */
export function skipBalanced(text: string, start: number): number {
  let depth = 0;
  for (let i = start; i < text.length; i++) {
    const c = text[i];
    if (c === "(" && text[i + 1] === "*") {
      const close = text.indexOf("*)", i + 2);
      if (close < 0) return text.length;
      i = close + 1;
    } else if (c === "(") depth++;
    else if (c === ")") {
      if (--depth === 0) return i + 1;
    } else if (c === '"' || c === "'") {
      const close = text.indexOf(c, i + 1);
      if (close < 0) return text.length;
      i = close;
    } else if (c === "^" && i + 1 < text.length) {
      const close = text.indexOf(text[i + 1] as string, i + 2);
      if (close < 0) return text.length;
      i = close;
    }
  }
  return text.length;
}
