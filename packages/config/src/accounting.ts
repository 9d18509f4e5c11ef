import { z } from "zod";

/**
 * Accounting: one usage record per job that ended (FINISHED, FAILED, KILLED; each rerun its own),
 * kept in a database and published to APEL (packages/accounting).
 */

/** A queue's CPU benchmark, per core (APEL ServiceLevelType/ServiceLevel). */
export const benchmarkSchema = z.object({
  type: z.enum(["HEPscore23", "HEPSPEC", "si2k"]),
  value: z.number().positive(),
});
export type BenchmarkConfig = z.infer<typeof benchmarkSchema>;

export const accountingSchema = z
  .object({
    /** Write usage records at all (the terminal move always appends them to the Redis stream). */
    enabled: z.boolean().default(true),
    /**
     * `sqlite:<path>` (or a bare path) or a `postgres://` / `postgresql://` URL. Default:
     * SQLite at <stateDir>/accounting/accounting.db.
     */
    database: z.string().optional(),
    /** Consumer name of this JEM in the stream's consumer group. Default: hostname and pid. */
    consumer: z.string().optional(),
    /** A stream entry pending this long with a consumer that has not acknowledged it is claimed by another. */
    claimIdleMs: z.number().int().positive().default(60_000),
    apel: z
      .object({
        /** ARGO Messaging Service base URL (`<targetUrl>/v1/projects/...`). */
        targetUrl: z.string().url().optional(),
        project: z.string().default("accounting"),
        topic: z.string().default("gLite-APEL"),
        /** API key (sent as `x-api-key`); or in a file. Neither: the key comes from `authnUrl`. */
        token: z.string().optional(),
        tokenFile: z.string().optional(),
        /**
         * ARGO's authentication service, which gives the AMS key for the host certificate
         * (`certFile`/`keyFile`, presented as TLS client certificate). Default, as ARGO's client library:
         * `https://<targetUrl host>:8443/v1/service-types/ams/hosts/<targetUrl host>:authx509`.
         */
        authnUrl: z.string().url().optional(),
        /** GOCDB site name. */
        site: z.string().default("UNKNOWN"),
        /** Submit host reported in records (default: the endpoint URL's host). */
        submitHost: z.string().optional(),
        /**
         * `summaries`: monthly `APEL-summary-job-message: v0.2` (as A-REX sends); `summaries-v0.3`: monthly
         * normalised summaries (durations × the queue's benchmark, no ServiceLevel); `individual`:
         * `APEL-individual-job-message: v0.3`, one record per job. A sync message always follows.
         */
        messages: z.enum(["individual", "summaries", "summaries-v0.3"]).default("summaries"),
        /** Only these VOs are published (empty: all). */
        vos: z.array(z.string()).default([]),
        /** Records per message. */
        batchSize: z.number().int().positive().max(1000).default(500),
        /**
         * VO of jobs with neither VOMS attributes nor `wlcg.groups`. Never empty, nor `none`/`null`,
         * which APEL stores as no VO at all.
         */
        vomslessVo: z
          .string()
          .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/, "VO names are letters, digits, . _ -")
          .refine((v) => !/^(none|null)$/i.test(v), "APEL reads none and null as no VO: name one")
          .default("vomsless"),
        /** CA bundle trusted for targetUrl (default: the CE's auth.caDir). */
        caFile: z.string().optional(),
        /** Signing certificate and key (default: the gateway's TLS certificate). */
        certFile: z.string().optional(),
        keyFile: z.string().optional(),
      })
      .default({}),
  })
  .default({});
export type AccountingConfig = z.infer<typeof accountingSchema>;
