import { createHash } from "node:crypto";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { AccountingConfig } from "@ce/config";
import type { AccountingDb } from "../db/index.js";
import { monthOf } from "../db/index.js";
import type { UsageRecord } from "../record.js";
import { ArgoPublisher, type ArgoTarget } from "./argo.js";
import {
  individualMessage,
  normalisedSummaryMessage,
  summarize,
  summarizeNormalised,
  summaryMessage,
  syncMessage,
  type ApelSite,
} from "./messages.js";
import { smimeSign } from "./sign.js";

type ApelConfig = AccountingConfig["apel"];

export interface ApelMessage {
  kind: "individual" | "summary" | "sync";
  text: string;
  /** What sending it settles: records (individual) or a month's summary digest. */
  recordIds?: string[];
  month?: string;
  digest?: string;
}

export interface PublishOptions {
  apel: ApelConfig;
  site: ApelSite;
  /** Signing credentials; absent: messages are not signed (dry runs without a host certificate). */
  signer?: { certFile: string; keyFile: string } | undefined;
  /** ARGO endpoint (for sending); dry runs need none. */
  argo?: ArgoTarget | undefined;
  /** `--dry-run --out DIR`: write the signed messages there, one file per message, send nothing, remember nothing. */
  outDir?: string | undefined;
  /** republish: the records that ended in [from, to] (epoch s) or, for summaries, the months they touch, whatever was sent before. */
  range?: { from: number; to: number } | undefined;
}

/** The key of a target in the sent-state tables: another endpoint, project or topic starts afresh. */
export const targetKey = (a: ApelConfig) => `${a.targetUrl ?? "(none)"}|${a.project}|${a.topic}`;

const publishable = (a: ApelConfig) => (r: UsageRecord) => r.batchId !== null && (a.vos.length === 0 || a.vos.includes(r.vo));

const chunks = <T>(xs: readonly T[], n: number): T[][] =>
  Array.from({ length: Math.ceil(xs.length / n) }, (_, i) => xs.slice(i * n, i * n + n));

/** The messages a publishing run sends: records or months not sent yet (or the republished range), then the sync message. */
export async function planMessages(db: AccountingDb, o: PublishOptions): Promise<ApelMessage[]> {
  const a = o.apel,
    target = targetKey(a),
    ok = publishable(a);
  const out: ApelMessage[] = [];
  let months: string[] = [];
  if (a.messages === "individual") {
    let recs: UsageRecord[];
    if (o.range) recs = (await db.endedBetween(o.range.from, o.range.to)).filter(ok);
    else {
      const unsent = await db.unsent(target, 100_000);
      // Records never to be published (no batch job, a VO not published) are settled as skipped.
      const skip = unsent.filter((r) => !ok(r)).map((r) => r.recordId);
      if (skip.length && !o.outDir) await db.markSent(target, skip, "skipped");
      recs = unsent.filter(ok);
    }
    for (const c of chunks(recs, a.batchSize))
      out.push({ kind: "individual", text: individualMessage(o.site, c), recordIds: c.map((r) => r.recordId) });
    months = [...new Set(recs.map((r) => monthOf(r.endTime)))];
  } else {
    const all = await db.months();
    const wanted = o.range ? all.filter((m) => m >= monthOf(o.range!.from) && m <= monthOf(o.range!.to)) : all;
    for (const m of wanted) {
      const recs = (await db.inMonths([m])).filter(ok);
      if (recs.length === 0) continue;
      // A changed message type changes the texts, hence the digest: the month is sent again in the new form.
      const texts =
        a.messages === "summaries-v0.3"
          ? chunks(summarizeNormalised(recs), a.batchSize).map((c) => normalisedSummaryMessage(o.site, c))
          : chunks(summarize(recs), a.batchSize).map((c) => summaryMessage(o.site, c));
      const digest = createHash("sha256").update(texts.join("\0")).digest("hex");
      if (!o.range && (await db.summaryDigest(target, m)) === digest) continue;
      texts.forEach((text, i) => out.push({ kind: "summary", text, month: m, ...(i === texts.length - 1 ? { digest } : {}) }));
      months.push(m);
    }
  }
  if (months.length) out.push({ kind: "sync", text: syncMessage(o.site, (await db.inMonths(months)).filter(ok)) });
  return out;
}

export interface PublishResult {
  messages: number;
  records: number;
  files?: string[];
}

/** Plans, signs and sends (or, dry run, writes) the messages; what was sent is remembered message by message. */
export async function publishApel(db: AccountingDb, o: PublishOptions): Promise<PublishResult> {
  const plan = await planMessages(db, o);
  const signed: string[] = [];
  for (const m of plan) signed.push(o.signer ? await smimeSign(m.text, o.signer.certFile, o.signer.keyFile) : m.text);
  const records = plan.reduce((n, m) => n + (m.recordIds?.length ?? 0), 0);
  if (o.outDir) {
    mkdirSync(o.outDir, { recursive: true });
    const files = plan.map((m, i) => {
      const f = join(o.outDir!, `${String(i + 1).padStart(4, "0")}-${m.kind}.msg`);
      writeFileSync(f, signed[i]!);
      return f;
    });
    return { messages: plan.length, records, files };
  }
  if (plan.length === 0) return { messages: 0, records: 0 };
  if (!o.argo) throw new Error("accounting.apel.targetUrl is not set: nothing to send to");
  const argo = new ArgoPublisher(o.argo);
  const target = targetKey(o.apel);
  try {
    const stamp = new Date().toISOString().replace(/[-:T]/g, "").replace(/\..*$/, "");
    for (let i = 0; i < plan.length; i++) {
      const m = plan[i]!;
      const [id] = await argo.publish([{ data: signed[i]!, empaid: `${stamp.slice(0, 8)}/${stamp}-${process.pid}-${i}` }]);
      if (m.recordIds) await db.markSent(target, m.recordIds, id!);
      if (m.month && m.digest) await db.markSummarySent(target, m.month, m.digest, id!);
    }
  } finally {
    await argo.close();
  }
  return { messages: plan.length, records };
}
