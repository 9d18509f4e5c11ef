import type { Context } from "hono";
import type { JobRecord } from "@ce/store";
import type { AppEnv } from "../context.js";
import type { Entry } from "../services/session/index.js";
import { hrefFor, type SessionPath } from "../services/session/index.js";
import { FileTable } from "./job.js";
import { type Crumb, jobHref, Layout, restBase, sendPage, trail } from "./layout.js";

/**
 * A session directory listing for people (`GET …/session/<dir>/` in HTML): breadcrumbs from the
 * CE down to this directory, a parent link, names, sizes and modification times, and the way to
 * the job page and its diagnose files. Every name links to its own URL (files download, directories
 * list), encoded by the same hrefFor as the REST renderings.
 */
export function sessionListingPage(
  c: Context<AppEnv>,
  job: JobRecord,
  p: SessionPath,
  listing: { files: Entry[]; dirs: Entry[] },
): Response {
  const base = restBase(c);
  const self = jobHref(base, job.id);
  const name = job.jobName || job.id;
  const dirCrumbs: Crumb[] = [{ label: "session", href: hrefFor(p.rootHref, [], true) }];
  p.segments.forEach((seg, i) => dirCrumbs.push({ label: seg, href: hrefFor(p.rootHref, p.segments.slice(0, i + 1), true) }));
  // The last crumb is this directory: text, not a link.
  dirCrumbs[dirCrumbs.length - 1] = { label: dirCrumbs[dirCrumbs.length - 1]!.label };
  const entries = [
    ...listing.dirs.map((d) => ({ name: d.name, dir: true, size: 0, mtimeMs: d.stat.mtimeMs })),
    ...listing.files.map((f) => ({ name: f.name, dir: false, size: f.stat.size, mtimeMs: f.stat.mtimeMs })),
  ];
  const parent = p.segments.length > 0 ? hrefFor(p.rootHref, p.segments.slice(0, -1), true) : undefined;
  return sendPage(
    c,
    <Layout
      title={`Session directory ${p.normalized} of job ${name}`}
      crumbs={trail(c, { label: "Jobs", href: `${base}/jobs` }, { label: name, href: self }, ...dirCrumbs)}
    >
      <p>
        <a href={self}>Job page</a> · <a href={`${self}/diagnose`}>Diagnose files</a>
        {entries.length > 0 ? (
          <>
            {" "}
            ·{" "}
            <a href={`${hrefFor(p.rootHref, p.segments, true)}?download=tar`} download>
              Download all (tar)
            </a>
          </>
        ) : (
          ""
        )}
      </p>
      <FileTable entries={entries} href={(e) => hrefFor(p.rootHref, [...p.segments, e.name], e.dir)} now={Date.now()} parent={parent} />
    </Layout>,
  );
}
