import { Failure } from "./failure.js";
/**
 * Errors raised while reading job descriptions. The `code` is stable (the gateway maps it to an
 * HTTP status and tests match on it); the message is meant for the grid user who wrote the text.
 */

export type DescriptionErrorCode =
  "XRSL_SYNTAX" | "ADL_SYNTAX" | "INVALID_DESCRIPTION" | "TOO_LARGE" | "LIMIT_EXCEEDED" | "UNSUPPORTED_FORMAT";

/** Where in the submitted text the problem is; line and column are 1-based. */
export interface SourcePosition {
  offset: number;
  line: number;
  column: number;
}

export class DescriptionError extends Failure<DescriptionErrorCode> {
  readonly position?: SourcePosition | undefined;

  constructor(code: DescriptionErrorCode, message: string, position?: SourcePosition) {
    super(code, message);
    this.position = position;
  }
}

/** Malformed xRSL text: the whole body is rejected. */
export class XrslSyntaxError extends DescriptionError {
  /** `detail` is the bare reason, without the position prefix. */
  readonly detail: string;
  constructor(detail: string, position: SourcePosition) {
    super("XRSL_SYNTAX", `xRSL syntax error at line ${position.line}, column ${position.column}: ${detail}`, position);
    this.detail = detail;
  }
}

/** Malformed or forbidden XML (bad nesting, DOCTYPE, entities): the whole body is rejected. */
export class AdlSyntaxError extends DescriptionError {
  readonly detail: string;
  constructor(detail: string, position?: SourcePosition) {
    super(
      "ADL_SYNTAX",
      position ? `ADL syntax error at line ${position.line}, column ${position.column}: ${detail}` : `ADL syntax error: ${detail}`,
      position,
    );
    this.detail = detail;
  }
}

/** Well-formed text whose content is not an acceptable job (bad value, unsafe path, ...). */
export class InvalidDescriptionError extends DescriptionError {
  /** The attribute / element / normalized field the problem is about, e.g. `cputime`, `inputFiles[1].name`. */
  readonly field?: string | undefined;
  constructor(message: string, field?: string, position?: SourcePosition) {
    super("INVALID_DESCRIPTION", message, position);
    this.field = field;
  }
}

export class DescriptionTooLargeError extends DescriptionError {
  readonly limit: number;
  readonly size: number;
  constructor(size: number, limit: number) {
    super("TOO_LARGE", `job description is too large: ${size} bytes, the limit is ${limit} bytes`);
    this.size = size;
    this.limit = limit;
  }
}

/**
 * A description (or the body) would grow past one of the caps of description/limits.ts; raised
 * while parsing or evaluating, before the memory is spent. `limit` names the cap, `max` its value.
 */
export class DescriptionLimitError extends DescriptionError {
  readonly limit: string;
  readonly max: number;
  constructor(limit: string, max: number, detail: string, position?: SourcePosition) {
    super("LIMIT_EXCEEDED", `job description exceeds the limit ${limit}=${max}: ${detail}`, position);
    this.limit = limit;
    this.max = max;
  }
}

export class UnsupportedFormatError extends DescriptionError {
  constructor(message: string) {
    super("UNSUPPORTED_FORMAT", message);
  }
}

export function isDescriptionError(e: unknown): e is DescriptionError {
  return e instanceof DescriptionError;
}

/** Converts a character offset into a 1-based line/column position. */
export function positionAt(text: string, offset: number): SourcePosition {
  const o = Number.isFinite(offset) ? Math.max(0, Math.min(Math.floor(offset), text.length)) : 0;
  // Start from the last checkpoint before `o`: a body with many failing items must not rescan
  // the whole text for each of them (one checkpoint per 4 Ki characters: 1280 for 5 MiB).
  const marks = checkpoints(text);
  const mark = marks[Math.min(marks.length - 1, Math.floor(o / STRIDE))] as Mark;
  let line = mark.line;
  let lineStart = mark.lineStart;
  for (let i = text.indexOf("\n", mark.offset); i >= 0 && i < o; i = text.indexOf("\n", i + 1)) {
    line++;
    lineStart = i + 1;
  }
  return { offset: o, line, column: o - lineStart + 1 };
}

interface Mark {
  offset: number;
  line: number;
  lineStart: number;
}
const STRIDE = 4096;
let cachedText: string | undefined;
let cachedMarks: Mark[] = [];

function checkpoints(text: string): Mark[] {
  if (text === cachedText) return cachedMarks;
  const marks: Mark[] = [{ offset: 0, line: 1, lineStart: 0 }];
  let line = 1;
  let lineStart = 0;
  let i = text.indexOf("\n");
  for (let at = STRIDE; at <= text.length; at += STRIDE) {
    for (; i >= 0 && i < at; i = text.indexOf("\n", i + 1)) {
      line++;
      lineStart = i + 1;
    }
    marks.push({ offset: at, line, lineStart });
  }
  cachedText = text;
  cachedMarks = marks;
  return marks;
}
