import type { Hono } from "hono";
import type { AppEnv } from "../context.js";
import { BadRequest, MethodNotAllowed } from "../errors.js";
import { formatOf, respond } from "../render.js";
import { infoPage } from "../pages/info.js";
import { infoDocument } from "../services/info.js";

/**
 * E2: the GLUE2 information document. `schema`: absent or `glue2`; anything else — including
 * `crr`, announced for 1.0 but never implemented anywhere — is a 400 naming the value (decisions #9).
 */
export function infoRoutes(r: Hono<AppEnv>): void {
  r.get("/:version/info", async (c) => {
    const schema = c.req.query("schema");
    if (schema !== undefined && schema !== "" && schema !== "glue2") {
      throw new BadRequest(`Schema ${JSON.stringify(schema)} is not supported; the only schema is glue2`, "SCHEMA_NOT_SUPPORTED");
    }
    const doc = await infoDocument(c.get("services"));
    if (formatOf(c) === "html") return infoPage(c, doc);
    return respond(c, doc, { title: "Computing element information" });
  });
  r.all("/:version/info", () => {
    throw new MethodNotAllowed(["GET", "HEAD"]);
  });
}
