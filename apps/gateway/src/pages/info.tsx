import type { Context } from "hono";
import type { El } from "@ce/glue2";
import type { AppEnv } from "../context.js";
import { Layout, sendPage, trail } from "./layout.js";

/**
 * The GLUE2 information document for people (`GET <base>/info` in HTML). The document is deep
 * (InfoRoot → … → ComputingShare → policy rules): nested tables grew wider than a window with
 * every level, so each structure is a collapsible section (`<details>`, keyboard-operable with no
 * script) holding its values as a name/value grid that becomes one column on narrow screens.
 */
export function infoPage(c: Context<AppEnv>, doc: El): Response {
  return sendPage(
    c,
    <Layout title="Computing element information" crumbs={trail(c, { label: "info" })}>
      <p class="muted small">The GLUE2 document brokers read (also as JSON and XML: ask with an Accept header).</p>
      <Structure e={doc} open />
    </Layout>,
  );
}

const isLeaf = (e: El) => !e.children || e.children.length === 0;

/** What a section is called: its element name and, when it has one, its Name or ID. */
function label(e: El): string {
  const named = e.children?.find((ch) => isLeaf(ch) && (ch.name === "Name" || ch.name === "ID"));
  return named?.text ? `${e.name}: ${named.text}` : e.name;
}

function Attrs(props: { e: El }) {
  const attrs = Object.entries(props.e.attrs ?? {}).filter(([k]) => k !== "xmlns" && !k.startsWith("xmlns:"));
  if (attrs.length === 0) return <></>;
  return <span class="muted small"> {attrs.map(([k, v]) => `${k}=${v}`).join(" ")}</span>;
}

export function Structure(props: { e: El; open?: boolean }) {
  // Runs of values become one grid; structures in between keep their place in document order.
  const blocks: (El | El[])[] = [];
  for (const ch of props.e.children ?? []) {
    const last = blocks.at(-1);
    if (isLeaf(ch)) {
      if (Array.isArray(last)) last.push(ch);
      else blocks.push([ch]);
    } else blocks.push(ch);
  }
  return (
    <details open={props.open ?? true}>
      <summary>
        {label(props.e)}
        <Attrs e={props.e} />
      </summary>
      {blocks.map((b) =>
        Array.isArray(b) ? (
          <dl class="kv">
            {b.map((leaf) => (
              <>
                <dt>
                  {leaf.name}
                  <Attrs e={leaf} />
                </dt>
                <dd>{leaf.text ? leaf.text : <span class="muted">(empty)</span>}</dd>
              </>
            ))}
          </dl>
        ) : (
          <Structure e={b} />
        ),
      )}
    </details>
  );
}
