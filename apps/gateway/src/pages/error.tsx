import type { Context } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import type { AppEnv } from "../context.js";
import { Layout, sendPage, trail } from "./layout.js";

/**
 * A whole-request failure for a browser (render.ts renderError, HTML negotiated): the error
 * document's two values in a table, in the pages' frame, so a person can go on from it. The
 * headers (X-Error-Code, Allow, Retry-After …) are the error's, set by the caller.
 */
export function errorPage(
  c: Context<AppEnv>,
  status: ContentfulStatusCode,
  title: string,
  reason: string,
  headers: Record<string, string>,
): Response {
  const crumbs = c.get("services") ? trail(c, { label: `${status}` }) : [{ label: `${status}` }];
  return sendPage(
    c,
    <Layout title={title} crumbs={crumbs}>
      <table>
        <tbody>
          <tr>
            <th scope="row">status-code</th>
            <td>{status}</td>
          </tr>
          <tr>
            <th scope="row">reason</th>
            <td>{reason}</td>
          </tr>
        </tbody>
      </table>
    </Layout>,
    status,
    headers,
  );
}
