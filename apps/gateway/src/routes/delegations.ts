import type { Context, Hono } from "hono";
import { delegationListDoc } from "@ce/glue2";
import type { DelegationType } from "@ce/store";
import type { AppEnv, Services } from "../context.js";
import { BadRequest, Forbidden, MethodNotAllowed } from "../errors.js";
import { respond } from "../render.js";
import { missingScope, requireScope } from "../middleware/identity/scopes.js";
import { mediaType, readTextBody, unsupportedType } from "../services/body.js";
import { DelegationService } from "../services/delegations.js";

/**
 * E8 `<base>/delegations` and E9 `<base>/delegations/<id>`.
 *
 * Codes (decisions #2 #3 #4 #8 #9; `compat.strictSpecCodes` gives the interface text's):
 *   new x509 → 201 CSR + Location;  new jwt (1.1) → 201 + Location (strict 200)
 *   PUT chain → 200;  bad chain → 400 naming the failed check;  unknown/foreign id → 404
 *   renew x509 → 201 CSR, also under 1.0 (strict: 1.0 → 200);  renew jwt (1.1) → 200
 *   get → 200 (x509 PEM chain without key / jwt: the token as application/jwt, whatever Accept says,
 *         to an X.509 caller or a token with compute.create; 403 to a read-only token, decisions #36);
 *   delete → 202 (strict 200)
 *   unknown action or type → 400;  other methods → 405 + Allow
 * Under /rest/1.0 only x509 delegations exist: `type` is ignored and jwt ones are invisible.
 */
export const COLLECTION_METHODS = ["GET", "HEAD", "POST"] as const;
export const ITEM_METHODS = ["POST", "PUT"] as const;
const PEM = "application/x-pem-file";
const JWT = "application/jwt";

export function delegationRoutes(r: Hono<AppEnv>): void {
  r.all("/:version/delegations", collection);
  r.all("/:version/delegations/:id", item);
}

const services = new WeakMap<Services, DelegationService>();
function service(c: Context<AppEnv>): DelegationService {
  const s = c.get("services");
  let svc = services.get(s);
  if (!svc) {
    const { delegationsPerOwner, delegationRenewalsPerMinute } = s.config.quotas;
    svc = new DelegationService({
      store: s.delegations,
      keyPool: s.keyPool,
      trust: s.trust,
      maxPerOwner: delegationsPerOwner,
      renewalsPerMinute: delegationRenewalsPerMinute,
    });
    services.set(s, svc);
  }
  return svc;
}

const strict = (c: Context<AppEnv>) => c.get("services").config.compat.strictSpecCodes;
const owner = (c: Context<AppEnv>) => c.get("identity").subject;

/** Query values quoted back in reasons: short and printable. */
const q = (v: string) => JSON.stringify(v.replace(/[^\x20-\x7e]/g, "?").slice(0, 40));

function typeParam(c: Context<AppEnv>, fallback: DelegationType | undefined): DelegationType | undefined {
  if (c.get("version") === "1.0") return fallback === undefined ? undefined : "x509"; // 1.0 has no type parameter
  const t = c.req.query("type");
  if (t === undefined || t === "") return fallback;
  if (t === "x509" || t === "jwt") return t;
  throw new BadRequest(`Unknown delegation type ${q(t)}: expected x509 or jwt`, "DELEGATION_TYPE_UNKNOWN");
}

function action(c: Context<AppEnv>, allowed: readonly string[]): string {
  const a = c.req.query("action");
  if (a === undefined || a === "") throw new BadRequest(`Missing action: expected ${allowed.join(", ")}`, "ACTION_MISSING");
  if (!allowed.includes(a)) throw new BadRequest(`Unknown action ${q(a)}: expected ${allowed.join(", ")}`, "ACTION_UNKNOWN");
  return a;
}

/**
 * Delegation POSTs carry no body (E9: "request body empty"; new alike): no Content-Type, as the
 * ARC client, aCT and curl `-X POST` send them, or `application/json`, which pyarcrest's shared
 * header dict leaks into later requests (decisions #35). Anything else is a 415 before any work:
 * the form encodings are what another site's form would send (docs/security.md, cross-site requests).
 */
function requireNoBodyType(c: Context<AppEnv>): void {
  const t = mediaType(c);
  if (t !== undefined && t !== "application/json") {
    throw unsupportedType(t, "delegation requests (they carry no body)", ["application/json"], true);
  }
}

/** E8 step 2: the signed certificate is `application/x-pem-file`; the ARC client sends no Content-Type. */
function requirePemType(c: Context<AppEnv>): void {
  const t = mediaType(c);
  if (t !== undefined && t !== PEM) throw unsupportedType(t, "a delegation's signed certificate", [PEM], true);
}

function tokenHeader(c: Context<AppEnv>): string | undefined {
  return c.req.header("x-token-delegation") ?? c.req.header("x-delegation");
}

async function collection(c: Context<AppEnv>): Promise<Response> {
  const method = c.req.method.toUpperCase();
  const version = c.get("version");
  if (method === "GET" || method === "HEAD") {
    const type = typeParam(c, undefined);
    requireScope(c, "jobinfo");
    const recs = await service(c).list(owner(c), version, type);
    // 1.0 lists ids only; 1.1 adds the type.
    const items = recs.map((d) => (version === "1.0" ? { id: d.id } : { id: d.id, type: d.type }));
    return respond(c, delegationListDoc(items), { title: "Delegations" });
  }
  if (method !== "POST") throw new MethodNotAllowed(COLLECTION_METHODS);
  action(c, ["new"]);
  requireNoBodyType(c);
  const type = typeParam(c, "x509");
  requireScope(c, "jobcreate");
  // Location is the request path (normalised, query stripped) plus the id (docs/interface.md E8: the ARC client needs it to end in /<id>).
  const location = (id: string) => `${c.req.path.replace(/\/+$/, "")}/${id}`;
  if (type === "jwt") {
    const id = await service(c).newJwt(owner(c), tokenHeader(c));
    c.get("log").info({ delegationId: id, type }, "delegation created");
    return c.body(null, strict(c) ? 200 : 201, { Location: location(id) });
  }
  const { id, csr } = await service(c).newX509(owner(c));
  c.get("log").info({ delegationId: id, type: "x509" }, "delegation requested");
  return c.body(csr, 201, { "Content-Type": PEM, Location: location(id), "Cache-Control": "no-store" });
}

async function item(c: Context<AppEnv>): Promise<Response> {
  const method = c.req.method.toUpperCase();
  const version = c.get("version");
  const id = c.req.param("id") ?? "";
  const svc = service(c);
  if (method === "PUT") {
    requireScope(c, "jobcreate");
    await svc.find(owner(c), id, version); // 404 before reading a body for nothing
    requirePemType(c);
    const body = await readTextBody(c, c.get("services").config.gateway.limits.delegationBytes, "delegation certificate");
    const res = await svc.acceptCertificate(c.get("identity"), id, version, body);
    c.get("log").info({ delegationId: id, expires: new Date(res.expires).toISOString() }, "delegation stored");
    return c.body(null, 200);
  }
  if (method !== "POST") throw new MethodNotAllowed(ITEM_METHODS);
  const act = action(c, ["get", "renew", "delete"]);
  requireNoBodyType(c);
  if (act === "get") {
    requireScope(c, "jobinfo");
    const rec = await svc.find(owner(c), id, version);
    if (rec.type === "x509") {
      const pem = await svc.publicChain(owner(c), id);
      return c.body(pem, 200, { "Content-Type": PEM, "Cache-Control": "no-store" });
    }
    // The stored token, as the interface text says, to whoever could have delegated it
    // (decisions #36): an X.509 caller, or a token caller that may create jobs and delegations.
    if (missingScope(c.get("services").config, c.get("identity"), "jobcreate"))
      throw new Forbidden(
        "The delegated token is given only to a caller that may create delegations: this token lacks scope compute.create",
        "DELEGATION_TOKEN_SCOPE",
        { "WWW-Authenticate": 'Bearer error="insufficient_scope", scope="compute.create"' },
      );
    const token = await svc.token(owner(c), id);
    c.get("log").info({ delegationId: id, type: "jwt" }, "delegated token handed out");
    return c.body(token, 200, { "Content-Type": JWT, "Cache-Control": "no-store" });
  }
  if (act === "delete") {
    requireScope(c, "jobdelete");
    await svc.delete(owner(c), id, version);
    c.get("log").info({ delegationId: id }, "delegation deleted");
    return c.body(null, strict(c) ? 200 : 202);
  }
  requireScope(c, "jobcreate");
  const rec = await svc.find(owner(c), id, version);
  if (rec.type === "jwt") {
    await svc.renewJwt(owner(c), id, tokenHeader(c));
    c.get("log").info({ delegationId: id, type: "jwt" }, "delegation renewed");
    return c.body(null, 200);
  }
  const csr = await svc.renewX509(owner(c), id, version);
  c.get("log").info({ delegationId: id, type: "x509" }, "delegation renewal requested");
  return c.body(csr, strict(c) && version === "1.0" ? 200 : 201, { "Content-Type": PEM, "Cache-Control": "no-store" });
}
