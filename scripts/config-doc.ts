// Prints every configuration key with its default as a Markdown table (README "Configuration").
import { configSchema } from "@ce/config";

const defaults = configSchema.parse({});
const rows: string[] = [];
function walk(v: unknown, path: string[]) {
  if (v && typeof v === "object" && !Array.isArray(v)) {
    for (const [k, c] of Object.entries(v)) walk(c, [...path, k]);
    return;
  }
  rows.push(`| \`${path.join(".")}\` | \`${JSON.stringify(v) ?? "(derived)"}\` |`);
}
walk(defaults, []);
console.log(["| key | default |", "|---|---|", ...rows].join("\n"));
