import { escapeXmlText, type JobListItem } from "@ce/glue2";

/**
 * `GET /jobs` body without building an element tree: a user may own 100,000 jobs, and the tree
 * plus its JSON intermediate cost ~10× the time and memory of the text itself. The output is
 * byte-identical to `render(jobListDoc(items), fmt)` (joblist.test.ts checks it).
 */
export function renderJobList(items: readonly JobListItem[], fmt: "json" | "xml"): string {
  if (fmt === "json") {
    const parts = items.map((j) => (j.state === undefined ? `{"id":${JSON.stringify(j.id)}}` : `{"id":${JSON.stringify(j.id)},"state":${JSON.stringify(j.state)}}`));
    return `{"job":[${parts.join(",")}]}`;
  }
  if (items.length === 0) return "<jobs/>";
  const parts = items.map((j) =>
    j.state === undefined ? `<job><id>${escapeXmlText(j.id)}</id></job>` : `<job><id>${escapeXmlText(j.id)}</id><state>${escapeXmlText(j.state)}</state></job>`,
  );
  return `<jobs>${parts.join("")}</jobs>`;
}
