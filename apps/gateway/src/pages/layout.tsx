import type { Context } from "hono";
import type { Child } from "hono/jsx";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { bytesInWords } from "@ce/model";
import { renderPage, type Crumb } from "@ce/ops/frame";
import type { AppEnv } from "../context.js";
import { sendRendered } from "../render.js";

/*
 * The frame of every page for people (docs/pages.md) is @ce/ops/frame (shared with the admin
 * listener's index): Layout, Crumb. This file adds what the CE's pages need around it.
 */
export { Layout, type Crumb } from "@ce/ops/frame";

/** A page element as the HTML answer: the negotiated-HTML headers of render.ts (CSP, length). */
export function sendPage(c: Context<AppEnv>, page: Child, status: ContentfulStatusCode = 200, headers?: Record<string, string>): Response {
  return sendRendered(c, renderPage(page), "html", { status, ...(headers ? { headers } : {}) });
}

/** Where the pages of this request's REST version live (`/arex/rest/1.1`). */
export function restBase(c: Context<AppEnv>): string {
  const version = c.get("version") ?? c.req.param("version") ?? "1.1";
  return `${c.get("services").config.mountPath}/rest/${version}`;
}

/** The breadcrumb trail: the CE's landing page first, then `rest` (the last one is this page). */
export function trail(c: Context<AppEnv>, ...rest: Crumb[]): Crumb[] {
  const host = new URL(c.get("services").config.endpoint.url).hostname;
  return [{ label: host, href: rest.length ? restBase(c) : undefined }, ...rest];
}

export const jobHref = (base: string, id: string) => `${base}/jobs/${encodeURIComponent(id)}`;

/** `2026-03-01 12:34:56Z`: UTC, seconds, readable and sortable. */
export function when(ms: number | undefined): string {
  if (ms === undefined || !Number.isFinite(ms) || ms <= 0) return "";
  return new Date(ms)
    .toISOString()
    .replace("T", " ")
    .replace(/\.\d{3}Z$/, "Z");
}

/** A time with its age: `<time>` carries the exact UTC value, the text says how long ago. */
export function Time(props: { ms: number | undefined; now: number }) {
  const exact = when(props.ms);
  if (!exact) return <span class="muted">–</span>;
  return (
    <time datetime={exact.replace(" ", "T")} title={exact}>
      {exact} <span class="muted small">({relative(props.now - (props.ms ?? 0))})</span>
    </time>
  );
}

/** How long ago (`ms` > 0) or how far ahead (session removal, proxy expiry): `5 min ago`, `in 7 d`. */
export function relative(ms: number): string {
  return ms >= 0 ? `${duration(ms)} ago` : `in ${duration(-ms)}`;
}
export const ago = (ms: number) => relative(Math.max(0, ms));

function duration(ms: number): string {
  const s = Math.round(ms / 1000);
  if (s < 90) return `${s} s`;
  if (s < 90 * 60) return `${Math.round(s / 60)} min`;
  if (s < 36 * 3600) return `${Math.round(s / 3600)} h`;
  return `${Math.round(s / 86400)} d`;
}

/** Sizes for people: the one rounding of @ce/model (ceadm prints the same). */
export const bytes = bytesInWords;

export function StateBadge(props: { state: string }) {
  return <span class={`state state-${props.state}`}>{props.state}</span>;
}

/** The last `CN=` of a DN (what people call the owner); the whole DN stays in the title. */
export function shortDn(dn: string): string {
  const cns = [...dn.matchAll(/CN=([^/,]+)/g)].map((m) => m[1]!);
  return cns.at(-1) ?? dn;
}
