import type { Context } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import type { El } from "@ce/glue2";
import type { AppEnv } from "../context.js";
import { Structure } from "./info.js";
import { Layout, sendPage, trail } from "./layout.js";

/*
 * Every other interface document a browser asks for (versions, delegations, one delegation, the
 * answer of a submission or bulk action made from a browser) in the pages' frame: breadcrumbs, a
 * heading, and the document as a table when it is a list, as collapsible sections otherwise.
 * Programs get the same document as JSON or XML (render.ts), untouched by this file.
 */

const isLeaf = (e: El) => !e.children || e.children.length === 0;

/** `delegation_id` → `Delegation id`: element names as column heads. */
const heading = (name: string) => {
  const words = name.replace(/[-_]/g, " ");
  return `${words[0]?.toUpperCase() ?? ""}${words.slice(1)}`;
};

export interface DocumentPageOptions {
  title?: string | undefined;
  status?: ContentfulStatusCode | undefined;
  headers?: Record<string, string> | undefined;
  /** Value → href (the glue2 renderer's hook: a job id → its page, a version → its base …). */
  links?: ((path: string[], text: string, node: El) => string | undefined) | undefined;
}

export function documentPage(c: Context<AppEnv>, root: El, opts: DocumentPageOptions = {}): Response {
  const title = opts.title ?? heading(root.name);
  const items = root.children ?? [];
  const link = (path: string[], e: El) => opts.links?.(path, e.text ?? "", e);
  const Value = (p: { path: string[]; e: El }) => {
    const href = link(p.path, p.e);
    const text = p.e.text ?? "";
    return href ? <a href={href}>{text}</a> : <>{text}</>;
  };
  let body;
  if (items.length === 0) body = <p class="muted">None.</p>;
  else if (items.every((e) => isLeaf(e) && e.name === items[0]!.name)) {
    // A list of values (versions): one column.
    body = (
      <table>
        <thead>
          <tr>
            <th scope="col">{heading(items[0]!.name)}</th>
          </tr>
        </thead>
        <tbody>
          {items.map((e) => (
            <tr>
              <td class="mono">
                <Value path={[root.name, e.name]} e={e} />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    );
  } else if (items.every((e) => !isLeaf(e) && e.name === items[0]!.name && (e.children ?? []).every(isLeaf))) {
    // A list of records (delegations, bulk results): one row each, a column per value name.
    const cols = [...new Set(items.flatMap((e) => (e.children ?? []).map((ch) => ch.name)))];
    body = (
      <div class="scroll">
        <table>
          <thead>
            <tr>
              {cols.map((n) => (
                <th scope="col">{heading(n)}</th>
              ))}
            </tr>
          </thead>
          <tbody>
            {items.map((e) => (
              <tr>
                {cols.map((n) => {
                  const values = (e.children ?? []).filter((ch) => ch.name === n);
                  return (
                    <td class="mono">
                      {values.map((v, i) => (
                        <>
                          {i > 0 ? ", " : ""}
                          <Value path={[root.name, e.name, n]} e={v} />
                        </>
                      ))}
                    </td>
                  );
                })}
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    );
  } else body = <Structure e={root} open />;
  return sendPage(
    c,
    <Layout title={title} crumbs={trail(c, { label: title })}>
      {body}
    </Layout>,
    opts.status ?? 200,
    opts.headers,
  );
}
