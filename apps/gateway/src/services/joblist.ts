import { escapeXmlText, type JobListItem } from "@ce/glue2";

const jsonItem = (j: JobListItem) =>
  j.state === undefined ? `{"id":${JSON.stringify(j.id)}}` : `{"id":${JSON.stringify(j.id)},"state":${JSON.stringify(j.state)}}`;
const xmlItem = (j: JobListItem) =>
  j.state === undefined
    ? `<job><id>${escapeXmlText(j.id)}</id></job>`
    : `<job><id>${escapeXmlText(j.id)}</id><state>${escapeXmlText(j.state)}</state></job>`;
const FRAME = { json: { open: '{"job":[', sep: ",", close: "]}" }, xml: { open: "<jobs>", sep: "", close: "</jobs>" } } as const;

/**
 * `GET /jobs` body without building an element tree: a user may own 100,000 jobs, and the tree
 * plus its JSON intermediate cost ~10× the time and memory of the text itself. The output is
 * byte-identical to `render(jobListDoc(items), fmt)` (joblist.test.ts checks it).
 */
export function renderJobList(items: readonly JobListItem[], fmt: "json" | "xml"): string {
  if (fmt === "xml" && items.length === 0) return "<jobs/>";
  const f = FRAME[fmt];
  return `${f.open}${items.map(fmt === "json" ? jsonItem : xmlItem).join(f.sep)}${f.close}`;
}

/** From this many jobs on, the list is streamed (streamJobList) instead of rendered whole. */
export const STREAM_MIN_JOBS = 2_000;
/** Jobs per streamed chunk: ~45 KB of JSON. */
const CHUNK_JOBS = 1_000;
/** Characters JSON and XML both write unchanged, one byte each. */
const PLAIN = /^[A-Za-z0-9._:-]*$/;

/**
 * The same bytes as renderJobList, as a stream of ~45 KB chunks made when the socket takes them,
 * plus their exact byte length (Content-Length, also for HEAD). The whole text of 100,000 jobs,
 * its per-item parts, its UTF-8 copy and that copy's TLS records all at once were ~35 MB of
 * gateway RSS at the peak of the 100,000-job benchmark; chunk by chunk they are ~0.1 MB.
 * The length is counted item by item first, without making the text of plain ids (UUIDs).
 */
export function streamJobList(items: readonly JobListItem[], fmt: "json" | "xml"): { length: number; body: ReadableStream<Uint8Array> } {
  if (fmt === "xml" && items.length === 0) {
    const whole = Buffer.from("<jobs/>");
    return { length: whole.byteLength, body: new Blob([whole]).stream() };
  }
  const f = FRAME[fmt];
  const item = fmt === "json" ? jsonItem : xmlItem;
  // An id (state) of plain ASCII is written as it is: its item's length is the frame's plus its own.
  const bare = [item({ id: "" }).length, item({ id: "", state: "" }).length] as const;
  let length = f.open.length + f.close.length + f.sep.length * Math.max(0, items.length - 1);
  for (const j of items) {
    const plain = PLAIN.test(j.id) && (j.state === undefined || PLAIN.test(j.state));
    length += plain ? bare[j.state === undefined ? 0 : 1] + j.id.length + (j.state?.length ?? 0) : Buffer.byteLength(item(j));
  }
  let next = 0;
  const body = new ReadableStream<Uint8Array>(
    {
      pull(ctrl) {
        const end = Math.min(next + CHUNK_JOBS, items.length);
        let text = `${next === 0 ? f.open : f.sep}${items.slice(next, end).map(item).join(f.sep)}`;
        next = end;
        if (next >= items.length) text += f.close;
        ctrl.enqueue(Buffer.from(text));
        if (next >= items.length) ctrl.close();
      },
    },
    // Nothing is made before the response is read (a HEAD never reads it).
    { highWaterMark: 0 },
  );
  return { length, body };
}
