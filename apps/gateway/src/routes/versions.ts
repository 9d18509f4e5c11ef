import type { Hono } from "hono";
import { versionsDoc } from "@ce/glue2";
import type { AppEnv } from "../context.js";
import { MethodNotAllowed } from "../errors.js";
import { respond } from "../render.js";

export const VERSIONS = ["1.0", "1.1"] as const;

/** E1: `GET <mount>/rest` lists the supported versions, ascending (decisions #22). */
export function versionRoutes(r: Hono<AppEnv>): void {
  r.get("/", (c) => respond(c, versionsDoc(VERSIONS), { title: "Supported REST versions" }));
  r.all("/", () => {
    throw new MethodNotAllowed(["GET", "HEAD"]);
  });
}
