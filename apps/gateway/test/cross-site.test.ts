import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { startTestGateway, XRSL, type J, type Reply, type TestGateway } from "./harness.js";

/**
 * Cross-site requests (docs/security.md): a browser presents the user's certificate to this CE on
 * any request, also one another site's page makes. Every state-changing request that says it
 * comes from another site (`Sec-Fetch-Site`, `Origin`) is refused 403 CROSS_SITE_REFUSED before
 * anything happens, and no REST route reads a body in a form encoding (the only ones a foreign
 * page can send without asking first), so an old browser that names neither header gets nowhere
 * either. Programs send neither header and pass (ARC client, pyarcrest, curl: their exact
 * requests are in tests/wire, tests/arc, tests/python).
 */
let t: TestGateway;
let alias: TestGateway;
let victim: string;
let delegation: string;

const JSON_ACCEPT = "application/json";
const ALIAS = "https://ce-alias.example";

async function jobCount(g: TestGateway = t): Promise<number> {
  return (await g.request("GET", `${g.rest}/1.1/jobs`, { accept: JSON_ACCEPT })).json<{ job: unknown[] }>().job.length;
}
async function delegationIds(): Promise<string[]> {
  const r = await t.request("GET", `${t.rest}/1.1/delegations`, { accept: JSON_ACCEPT });
  return r.json<{ delegation: { id: string }[] }>().delegation.map((d) => d.id);
}
const submitted = (r: Reply): string => {
  expect(r.status, r.text).toBe(201);
  const item = r.json<J>().job[0];
  expect(item["status-code"], r.text).toBe("201");
  return item.id as string;
};

beforeAll(async () => {
  t = await startTestGateway(inject("redisUrl"));
  alias = await startTestGateway(inject("redisUrl"), { gateway: { extraOrigins: [ALIAS] } });
  victim = submitted(
    await t.request("POST", `${t.rest}/1.1/jobs?action=new`, {
      body: XRSL("victim"),
      accept: JSON_ACCEPT,
      headers: { "content-type": "application/rsl" },
    }),
  );
  const d = await t.request("POST", `${t.rest}/1.1/delegations?action=new`);
  expect(d.status).toBe(201);
  delegation = String(d.headers.location).split("/").at(-1)!;
});
afterAll(async () => {
  await t?.close();
  await alias?.close();
});

/** What a foreign page can make a browser send: its own Origin, or the browser's own verdict. */
const FOREIGN: Record<string, string>[] = [
  { origin: "https://evil.example", "sec-fetch-site": "cross-site" },
  { origin: "https://evil.example" },
  { origin: "null" }, // a sandboxed frame, a data: URL, a redirect from another site
  { "sec-fetch-site": "cross-site" },
  { "sec-fetch-site": "same-site" }, // another host of the same site is another origin
  { "sec-fetch-site": "cross-site", origin: "https://localhost:8443" }, // the browser's verdict wins
  { origin: "http://localhost:8443" }, // another scheme is another origin
  { origin: "https://localhost:8443.evil.example" },
];

/** Every state-changing route, each with the body a self-submitting text/plain form would carry. */
const ROUTES = (): { name: string; method: string; path: string; body: string }[] => [
  { name: "submit", method: "POST", path: `${t.rest}/1.1/jobs?action=new`, body: `&(executable=/bin/echo)(arguments="pwned")\r\n` },
  { name: "kill", method: "POST", path: `${t.rest}/1.1/jobs?action=kill`, body: `{"job":[{"id":"${victim}"}],"x":"="}\r\n` },
  { name: "clean", method: "POST", path: `${t.rest}/1.0/jobs?action=clean`, body: `<jobs><job><id>${victim}</id></job></jobs>` },
  { name: "restart", method: "POST", path: `${t.rest}/1.1/jobs?action=restart`, body: `{"job":[{"id":"${victim}"}]}` },
  { name: "delegation new", method: "POST", path: `${t.rest}/1.1/delegations?action=new`, body: "" },
  { name: "delegation delete", method: "POST", path: `${t.rest}/1.1/delegations/${delegation}?action=delete`, body: "" },
  { name: "delegation PUT", method: "PUT", path: `${t.rest}/1.1/delegations/${delegation}`, body: "-----BEGIN CERTIFICATE-----" },
  { name: "session PUT", method: "PUT", path: `${t.rest}/1.1/jobs/${victim}/session/planted`, body: "x" },
  { name: "session DELETE", method: "DELETE", path: `${t.rest}/1.1/jobs/${victim}/session/planted`, body: "" },
  { name: "job page button", method: "POST", path: `${t.rest}/1.1/jobs/${victim}`, body: "action=kill" },
];

describe("one cross-site rule for every state-changing request", () => {
  it("another site's request is refused 403 CROSS_SITE_REFUSED on every route, naming the header and its value", async () => {
    const jobs = await jobCount();
    const delegations = await delegationIds();
    for (const route of ROUTES()) {
      for (const headers of FOREIGN) {
        for (const contentType of ["text/plain", "application/x-www-form-urlencoded"]) {
          const r = await t.request(route.method, route.path, {
            body: route.body,
            accept: JSON_ACCEPT,
            headers: { "content-type": contentType, ...headers },
          });
          const what = `${route.name} ${JSON.stringify(headers)} ${contentType}`;
          expect(r.status, what).toBe(403);
          expect(r.headers["x-error-code"], what).toBe("CROSS_SITE_REFUSED");
          const reason = r.json<J>().reason as string;
          if (headers["sec-fetch-site"] !== undefined) expect(reason, what).toContain(`Sec-Fetch-Site: ${headers["sec-fetch-site"]}`);
          else expect(reason, what).toContain(`Origin: ${headers.origin}`);
        }
      }
    }
    // Nothing happened: no job, no kill, no clean, no delegation made or removed.
    expect(await jobCount()).toBe(jobs);
    const rec = await t.gw.services.jobs.get(victim);
    expect(rec?.killRequested).toBeFalsy();
    expect(rec?.cleanRequested).toBeFalsy();
    expect(rec?.restartRequested).toBeFalsy();
    expect(await delegationIds()).toEqual(delegations);
  });

  it("a repeated Origin or Sec-Fetch-Site header is refused (one of them is foreign)", async () => {
    for (const headers of [
      { origin: ["https://localhost:8443", "https://evil.example"] },
      { "sec-fetch-site": ["same-origin", "cross-site"] },
    ]) {
      const r = await t.raw(
        `POST ${t.rest}/1.1/delegations?action=new HTTP/1.1\r\nHost: localhost\r\n` +
          Object.entries(headers)
            .flatMap(([k, vs]) => vs.map((v: string) => `${k}: ${v}\r\n`))
            .join("") +
          "Accept: application/json\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
      );
      expect(r.status, JSON.stringify(headers)).toBe(403);
      expect(r.head).toMatch(/x-error-code: CROSS_SITE_REFUSED/i);
    }
  });

  it("reading is not refused: a link from another site still shows the job list", async () => {
    const r = await t.request("GET", `${t.rest}/1.1/jobs`, {
      accept: JSON_ACCEPT,
      headers: { "sec-fetch-site": "cross-site", origin: "https://evil.example" },
    });
    expect(r.status).toBe(200);
  });

  it("the CE's own origin (endpoint.url's), Sec-Fetch-Site same-origin or none, and programs (neither header) pass", async () => {
    const own: Record<string, string>[] = [
      {},
      { origin: "https://localhost:8443" },
      { origin: "https://localhost:8443", "sec-fetch-site": "same-origin" },
      { "sec-fetch-site": "none" },
    ];
    for (const headers of own) {
      const r = await t.request("POST", `${t.rest}/1.1/jobs?action=new`, {
        body: XRSL("own"),
        accept: JSON_ACCEPT,
        headers: { "content-type": "application/rsl", ...headers },
      });
      submitted(r);
    }
  });

  it("gateway.extraOrigins: another name of the same CE is its own too; the endpoint's still is", async () => {
    const before = await jobCount(alias);
    for (const origin of [ALIAS, "https://localhost:8443"]) {
      submitted(
        await alias.request("POST", `${alias.rest}/1.1/jobs?action=new`, {
          body: XRSL("alias"),
          accept: JSON_ACCEPT,
          headers: { "content-type": "application/rsl", origin, "sec-fetch-site": "same-origin" },
        }),
      );
    }
    const r = await alias.request("POST", `${alias.rest}/1.1/jobs?action=new`, {
      body: XRSL("alias"),
      accept: JSON_ACCEPT,
      headers: { "content-type": "application/rsl", origin: "https://other.example" },
    });
    expect(r.status).toBe(403);
    expect(r.json<J>().reason).toContain(`is not this CE's origin (https://localhost:8443, ${ALIAS})`);
    expect(await jobCount(alias)).toBe(before + 2);
  });
});

describe("REST bodies: each route takes the types the interface names, never a form encoding", () => {
  const FORM_TYPES = ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "text/plain; charset=utf-8"];

  it("submission: a form-typed (or any unnamed) body is 415 naming application/xml and application/rsl; no job", async () => {
    const jobs = await jobCount();
    for (const ct of [...FORM_TYPES, "application/octet-stream", "*/*"]) {
      const r = await t.request("POST", `${t.rest}/1.1/jobs?action=new`, {
        body: XRSL("form"),
        accept: JSON_ACCEPT,
        headers: { "content-type": ct },
      });
      expect(r.status, ct).toBe(415);
      expect(r.headers["x-error-code"]).toBe("UNSUPPORTED_MEDIA_TYPE");
      expect(r.json<J>().reason, ct).toMatch(/application\/xml \(ADL\), application\/rsl \(xRSL\) or no Content-Type/);
    }
    expect(await jobCount()).toBe(jobs);
    // The named types, and none (the ARC client: decisions #11).
    submitted(
      await t.request("POST", `${t.rest}/1.1/jobs?action=new`, {
        body: XRSL("rsl"),
        accept: JSON_ACCEPT,
        headers: { "content-type": "application/rsl" },
      }),
    );
    submitted(await t.request("POST", `${t.rest}/1.1/jobs?action=new`, { body: XRSL("untyped"), accept: JSON_ACCEPT }));
  });

  it("bulk actions: a form-typed id list is 415 naming application/json and application/xml; nothing killed", async () => {
    for (const ct of FORM_TYPES) {
      const r = await t.request("POST", `${t.rest}/1.1/jobs?action=kill`, {
        body: JSON.stringify({ job: [{ id: victim }] }),
        accept: JSON_ACCEPT,
        headers: { "content-type": ct },
      });
      expect(r.status, ct).toBe(415);
      expect(r.json<J>().reason).toMatch(/job id lists; send application\/json, application\/xml or no Content-Type/);
    }
    expect((await t.gw.services.jobs.get(victim))?.killRequested).toBeFalsy();
    for (const [ct, body] of [
      ["application/json", JSON.stringify({ job: [{ id: victim }] })],
      ["application/xml", `<jobs><job><id>${victim}</id></job></jobs>`],
      [undefined, `<jobs><job><id>${victim}</id></job></jobs>`],
    ] as const) {
      const r = await t.request("POST", `${t.rest}/1.0/jobs?action=status`, {
        body,
        accept: JSON_ACCEPT,
        headers: ct ? { "content-type": ct } : {},
      });
      expect(r.status, String(ct)).toBe(201);
    }
  });

  it("delegation POSTs carry no body: form types are 415, no type or pyarcrest's leaked application/json pass", async () => {
    const before = await delegationIds();
    for (const ct of FORM_TYPES) {
      const r = await t.request("POST", `${t.rest}/1.1/delegations?action=new`, { accept: JSON_ACCEPT, headers: { "content-type": ct } });
      expect(r.status, ct).toBe(415);
      expect(r.json<J>().reason).toContain("delegation requests (they carry no body); send application/json or no Content-Type");
      const del = await t.request("POST", `${t.rest}/1.1/delegations/${delegation}?action=delete`, {
        accept: JSON_ACCEPT,
        headers: { "content-type": ct },
      });
      expect(del.status, ct).toBe(415);
    }
    expect(await delegationIds()).toEqual(before);
    const json = await t.request("POST", `${t.rest}/1.1/delegations?action=new`, { headers: { "content-type": "application/json" } });
    expect(json.status).toBe(201);
    expect(json.headers["content-type"]).toBe("application/x-pem-file");
  });

  it("the signed certificate's PUT takes application/x-pem-file or no type; a form type is 415", async () => {
    const r = await t.request("PUT", `${t.rest}/1.1/delegations/${delegation}`, {
      body: "-----BEGIN CERTIFICATE-----\n",
      accept: JSON_ACCEPT,
      headers: { "content-type": "application/x-www-form-urlencoded" },
    });
    expect(r.status).toBe(415);
    expect(r.json<J>().reason).toContain("send application/x-pem-file or no Content-Type");
    // The named type reaches the chain check (400 naming it), not the type check.
    const pem = await t.request("PUT", `${t.rest}/1.1/delegations/${delegation}`, {
      body: "-----BEGIN CERTIFICATE-----\n",
      accept: JSON_ACCEPT,
      headers: { "content-type": "application/x-pem-file" },
    });
    expect(pem.status).toBe(400);
  });
});
