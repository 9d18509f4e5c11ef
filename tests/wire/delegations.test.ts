/**
 * Wire contract: E8 "Delegations: list and create", E9 "Delegations: manage one", and E5
 * `action=delegations`. Written from the interface text; see wire.ts for the conventions.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { signCsrAsProxy } from "@ce/x509/testing";
import { startTestGateway, type CredName, type Reply, type TestGateway } from "../../apps/gateway/test/harness.js";
import {
  ACCEPT,
  FORMATS,
  VERSIONS,
  bulk,
  errorOf,
  expectFormat,
  expectItemBasics,
  kid,
  kids,
  local,
  parseXml,
  submit,
  type Version,
} from "./wire.js";

let t: TestGateway;
let strict: TestGateway;
beforeAll(async () => {
  t = await startTestGateway(inject("redisUrl"));
  strict = await startTestGateway(inject("redisUrl"), { compat: { strictSpecCodes: true } });
});
afterAll(async () => {
  await t?.close();
  await strict?.close();
});

const PEM = "application/x-pem-file";
const JWT = (n: string) => `eyJhbGciOiJIUzI1NiJ9.${Buffer.from(JSON.stringify({ sub: `wire-${n}` })).toString("base64url")}.${n}sig`;

/** The client's half of the X.509 exchange: sign the CSR with the caller's proxy (what arcsub does). */
function signAs(g: TestGateway, csr: string, as: CredName = "alice"): string {
  const cred = g.pki.creds[as]!;
  const certs = cred.cert.split(/(?=-----BEGIN CERTIFICATE-----)/);
  return signCsrAsProxy(csr, certs[0]!, cred.key, certs.slice(1).join(""));
}

/** The delegation id from Location: "the URL of the delegation with the assigned delegation id". */
function idFrom(g: TestGateway, r: Reply, version: Version): string {
  const loc = String(r.headers.location ?? "");
  const path = new URL(loc, g.origin).pathname;
  expect(path).toMatch(new RegExp(`^${g.rest}/${version}/delegations/[^/]+$`));
  return path.slice(path.lastIndexOf("/") + 1);
}

async function newX509(g: TestGateway, version: Version, query = ""): Promise<string> {
  const r = await g.request("POST", `${g.rest}/${version}/delegations?action=new${query}`);
  // X.509 creation 1: "returns HTTP 201 with a certificate request as application/x-pem-file; Location ...".
  expect(r.status).toBe(201);
  expect(r.headers["content-type"]).toBe(PEM);
  expect(r.text).toContain("-----BEGIN CERTIFICATE REQUEST-----");
  const id = idFrom(g, r, version);
  // X.509 creation 2: PUT the signed certificate, Content-Type application/x-pem-file → 200.
  const put = await g.request("PUT", `${g.rest}/${version}/delegations/${id}`, {
    body: signAs(g, r.text),
    headers: { "content-type": PEM },
  });
  expect(put.status).toBe(200);
  return id;
}

async function newJwt(g: TestGateway, token: string, header = "X-Token-Delegation"): Promise<{ r: Reply; id: string }> {
  const r = await g.request("POST", `${g.rest}/1.1/delegations?action=new&type=jwt`, { headers: { [header]: `bearer ${token}` } });
  return { r, id: r.headers.location ? idFrom(g, r, "1.1") : "" };
}

const action = (g: TestGateway, version: Version, id: string, act: string, headers: Record<string, string> = {}) =>
  g.request("POST", `${g.rest}/${version}/delegations/${id}?action=${act}`, { headers });

describe("E8 X.509 creation (two steps) and E9 get/renew/delete", () => {
  for (const version of VERSIONS) {
    it(`${version}: new → 201 CSR + Location; PUT signed → 200; get → 200 x-pem-file without the private key`, async () => {
      const id = await newX509(t, version, version === "1.1" ? "&type=x509" : "");
      const get = await action(t, version, id, "get");
      expect(get.status).toBe(200);
      expect(get.headers["content-type"]).toBe(PEM); // E9 get: "x509: public part of the stored delegation, application/x-pem-file"
      expect(get.text).toContain("-----BEGIN CERTIFICATE-----");
      expect(get.text).not.toMatch(/PRIVATE KEY/);
    });
    it(`${version}: renew → CSR as x-pem-file, then PUT → 200 (1.1: 201; 1.0: 201 too, Deviation #4)`, async () => {
      const id = await newX509(t, version);
      const renew = await action(t, version, id, "renew");
      expect(renew.status).toBe(201);
      expect(renew.headers["content-type"]).toBe(PEM);
      expect(renew.text).toContain("-----BEGIN CERTIFICATE REQUEST-----");
      const put = await t.request("PUT", `${t.rest}/${version}/delegations/${id}`, {
        body: signAs(t, renew.text),
        headers: { "content-type": PEM },
      });
      expect(put.status).toBe(200);
    });
    it(`${version}: delete → no body; 202 (the interface text says 200: Deviation #3); gone afterwards`, async () => {
      const id = await newX509(t, version);
      const del = await action(t, version, id, "delete");
      expect(del.status).toBe(202);
      expect(del.text).toBe("");
      expect((await action(t, version, id, "get")).status).toBe(404);
    });
  }
  it('1.1: type defaults to x509 (E8: "type default is x509")', async () => {
    const id = await newX509(t, "1.1");
    const list = (await t.request("GET", `${t.rest}/1.1/delegations`, { accept: ACCEPT.json })).json();
    expect(list.delegation).toContainEqual({ id, type: "x509" });
  });
  it("compat.strictSpecCodes: renew under 1.0 → 200, delete → 200 (the interface text's codes)", async () => {
    const id = await newX509(strict, "1.0");
    const renew = await action(strict, "1.0", id, "renew");
    expect(renew.status).toBe(200);
    expect(renew.headers["content-type"]).toBe(PEM);
    const renew11 = await action(strict, "1.1", id, "renew");
    expect(renew11.status).toBe(201); // Versioning table: renew x509 response 1.1 = 201
    expect((await action(strict, "1.0", id, "delete")).status).toBe(200);
  });
});

describe("E8 JWT creation (1.1) and E9 get/renew/delete of a JWT delegation", () => {
  it("new with X-Token-Delegation: bearer <JWT> → Location; 201 (the interface text says 200: Deviation #2)", async () => {
    const { r, id } = await newJwt(t, JWT("a"));
    expect(r.status).toBe(201);
    expect(id).not.toBe("");
    // E9 get: "jwt: the stored token, application/jwt" (for its owner, whatever Accept asks for;
    // a compute.read-only token is refused: decisions #36, pinned in apps/gateway/test/delegations.test.ts).
    for (const headers of [{}, { Accept: ACCEPT.json }, { Accept: ACCEPT.xml }] as Record<string, string>[]) {
      const get = await action(t, "1.1", id, "get", headers);
      expect(get.status).toBe(200);
      expect(get.headers["content-type"]).toBe("application/jwt");
      expect(get.text).toBe(JWT("a"));
    }
  });
  it("renew replaces the token from X-Delegation or X-Token-Delegation → 200", async () => {
    const { id } = await newJwt(t, JWT("b"));
    for (const [header, tok, sub] of [
      ["X-Delegation", JWT("c"), "wire-c"],
      ["X-Token-Delegation", JWT("d"), "wire-d"],
    ] as const) {
      const r = await action(t, "1.1", id, "renew", { [header]: `bearer ${tok}` });
      expect(r.status, header).toBe(200);
      expect((await action(t, "1.1", id, "get")).text, sub).toBe(tok);
    }
  });
  it("compat.strictSpecCodes: JWT creation → 200 + Location, delete → 200", async () => {
    const { r, id } = await newJwt(strict, JWT("e"));
    expect(r.status).toBe(200);
    expect(id).not.toBe("");
    expect((await action(strict, "1.1", id, "delete")).status).toBe(200);
  });
  it("under /rest/1.0 JWT delegations are not seen (Deviation #27)", async () => {
    const { id } = await newJwt(t, JWT("f"));
    expect((await action(t, "1.0", id, "get")).status).toBe(404);
    const list = (await t.request("GET", `${t.rest}/1.0/delegations`, { accept: ACCEPT.json })).json();
    expect(list.delegation.map((d: { id: string }) => d.id)).not.toContain(id);
  });
});

describe("E8 list (GET <base>/delegations)", () => {
  let x509: string;
  let jwt: string;
  beforeAll(async () => {
    x509 = await newX509(t, "1.1");
    jwt = (await newJwt(t, JWT("g"))).id;
  });
  for (const fmt of FORMATS) {
    it(`1.1 ${fmt}: items with id and type; the type filter selects`, async () => {
      const get = async (q: string) => {
        const r = await t.request("GET", `${t.rest}/1.1/delegations${q}`, { accept: ACCEPT[fmt] });
        expect(r.status).toBe(200);
        expectFormat(r, fmt);
        if (fmt === "json") {
          const doc = r.json();
          expect(Object.keys(doc)).toEqual(["delegation"]);
          expect(Array.isArray(doc.delegation)).toBe(true); // Deviation #6
          return doc.delegation as { id: string; type: string }[];
        }
        const root = parseXml(r.text);
        expect(local(root.name)).toBe("delegations");
        return kids(root, "delegation").map((d) => {
          expect(d.children.map((c) => local(c.name))).toEqual(["id", "type"]);
          return { id: kid(d, "id")!.text, type: kid(d, "type")!.text };
        });
      };
      const all = await get("");
      expect(all).toContainEqual({ id: x509, type: "x509" });
      expect(all).toContainEqual({ id: jwt, type: "jwt" });
      expect((await get("?type=jwt")).every((d) => d.type === "jwt")).toBe(true);
      expect((await get("?type=jwt")).map((d) => d.id)).toContain(jwt);
      expect((await get("?type=x509")).map((d) => d.id)).not.toContain(jwt);
    });
    it(`1.0 ${fmt}: items carry only id`, async () => {
      const r = await t.request("GET", `${t.rest}/1.0/delegations`, { accept: ACCEPT[fmt] });
      expect(r.status).toBe(200);
      if (fmt === "json") {
        const items = r.json().delegation as Record<string, unknown>[];
        expect(items).toContainEqual({ id: x509 });
        for (const d of items) expect(Object.keys(d)).toEqual(["id"]);
      } else {
        const ds = kids(parseXml(r.text), "delegation");
        expect(ds.map((d) => kid(d, "id")!.text)).toContain(x509);
        for (const d of ds) expect(d.children.map((c) => local(c.name))).toEqual(["id"]);
      }
    });
  }
  it("Authentication 1: scoped to the user; bob neither lists nor reaches alice's delegation (404)", async () => {
    const list = (await t.request("GET", `${t.rest}/1.1/delegations`, { accept: ACCEPT.json, as: "bob" })).json();
    expect(list.delegation.map((d: { id: string }) => d.id)).not.toContain(x509);
    const r = await t.request("POST", `${t.rest}/1.1/delegations/${x509}?action=get`, { as: "bob" });
    expect(r.status).toBe(404);
  });
  it("HEAD on the list is supported", async () => {
    const r = await t.request("HEAD", `${t.rest}/1.1/delegations`, { accept: ACCEPT.json });
    expect(r.status).toBe(200);
    expect(r.text).toBe("");
  });
});

describe("E8/E9 methods and actions that are not supported (Deviation #8, #9)", () => {
  it("PUT, DELETE on /delegations → 405 with Allow", async () => {
    for (const m of ["PUT", "DELETE"]) {
      const r = await t.request(m, `${t.rest}/1.1/delegations`, { accept: ACCEPT.json, body: "" });
      expect(r.status, m).toBe(405);
      expect(String(r.headers.allow)).toContain("POST");
    }
  });
  it("GET, HEAD, DELETE on /delegations/<id> → 405 with Allow", async () => {
    const id = await newX509(t, "1.1");
    for (const m of ["GET", "HEAD", "DELETE"]) {
      const r = await t.request(m, `${t.rest}/1.1/delegations/${id}`, { accept: ACCEPT.json });
      expect(r.status, m).toBe(405);
      expect(String(r.headers.allow)).toContain("PUT");
    }
  });
  it("unknown action or type → 400 naming it", async () => {
    const a = await t.request("POST", `${t.rest}/1.1/delegations?action=make`, { accept: ACCEPT.json });
    expect(a.status).toBe(400);
    expect(errorOf(a, "json").reason).toContain("make");
    const ty = await t.request("POST", `${t.rest}/1.1/delegations?action=new&type=saml`, { accept: ACCEPT.json });
    expect(ty.status).toBe(400);
    expect(errorOf(ty, "json").reason).toContain("saml");
  });
});

describe("E5 action=delegations: the delegations of a job", () => {
  let deleg: string;
  beforeAll(async () => {
    deleg = await newX509(t, "1.1");
  });
  for (const version of VERSIONS) {
    for (const fmt of FORMATS) {
      it(`${version} ${fmt}: items 200 with status-code, reason, id, delegation_id (array of strings)`, async () => {
        // 1.0: the id must be in the description; 1.1 may use the delegation_id parameter (E9, last paragraph).
        const sub =
          version === "1.0"
            ? await submit(t, version, `&(executable="/bin/echo")(delegationid="${deleg}")`, "json")
            : await submit(t, version, '&(executable="/bin/echo")', "json", { query: `&delegation_id=${deleg}` });
        const plain = await submit(t, version, '&(executable="/bin/echo")', "json");
        const ids = [sub.items[0]!.id!, plain.items[0]!.id!];
        const { r, items } = await bulk(t, version, "delegations", ids, fmt);
        expect(r.status).toBe(201); // Deviation #1
        expectItemBasics(items, fmt, r);
        expect(items.map((i) => [i["status-code"], i.id])).toEqual([
          ["200", ids[0]],
          ["200", ids[1]],
        ]);
        if (fmt === "json") {
          expect(items[0]!.delegation_id).toEqual([deleg]);
          expect(items[1]!.delegation_id).toEqual([]);
        } else {
          // XML: repeated delegation_id elements (none for a job without delegations).
          expect(items[0]!.delegation_id).toBe(deleg);
          expect(items[1]!.delegation_id).toBeUndefined();
        }
      });
    }
  }
  it("1.1: the delegation_id parameter is a default; a delegation id inside the description wins (E4 query table)", async () => {
    const other = await newX509(t, "1.1");
    const sub = await submit(t, "1.1", `&(executable="/bin/echo")(delegationid="${other}")`, "json", { query: `&delegation_id=${deleg}` });
    expect(sub.items[0]!["status-code"]).toBe("201");
    const { items } = await bulk(t, "1.1", "delegations", [sub.items[0]!.id!], "json");
    expect(items[0]!.delegation_id).toEqual([other]);
  });
  it("an unknown id: 404 with the id", async () => {
    const { items } = await bulk(t, "1.1", "delegations", ["00000000-0000-4000-8000-000000000000"], "json");
    expect(items[0]).toMatchObject({ "status-code": "404", id: "00000000-0000-4000-8000-000000000000" });
  });
});
