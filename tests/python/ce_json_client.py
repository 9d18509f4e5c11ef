#!/usr/bin/env python3
"""A stand-alone JSON client of the CE REST interface (standard library only).

Exercises what the ARC 6 command-line client cannot: version negotiation, bearer-token
authentication, 1.1 features (instances / instances_min, JWT delegations, delegation_id,
state filter) and the JSON renderings (forced arrays, string status codes, info_document).
One part authenticates with an X.509 proxy as TLS client certificate instead of a token.

    ce_json_client.py --url https://localhost:PORT/arex --cafile ca.pem --token JWT \
        --deleg-token JWT --deleg-token2 JWT --read-token JWT --proxy proxy.pem [--max-per-request N]

Every step is checked; prints one line per check and `N passed, M failed` at the end
(exit status 1 when anything failed).
"""
import argparse
import http.client
import json
import re
import ssl
import sys
import time
import urllib.parse

PASSED = 0
FAILED = 0


def check(name, cond, detail=""):
    global PASSED, FAILED
    if cond:
        PASSED += 1
        print(f"ok   {name}")
    else:
        FAILED += 1
        print(f"FAIL {name} {detail}")
    return cond


class Client:
    def __init__(self, url, ctx, token=None):
        u = urllib.parse.urlsplit(url)
        self.host, self.port, self.root = u.hostname, u.port or 443, u.path.rstrip("/")
        self.ctx, self.token, self.version = ctx, token, "1.0"

    def request(self, method, path, body=None, headers=None, base=True):
        """path is relative to <endpoint>/rest/<version> (base=True) or to the endpoint."""
        full = f"{self.root}/rest/{self.version}{path}" if base else f"{self.root}{path}"
        h = {"Accept": "application/json"}
        if self.token:
            h["Authorization"] = f"Bearer {self.token}"
        h.update(headers or {})
        if isinstance(body, (dict, list)):
            body, h["Content-Type"] = json.dumps(body), "application/json"
        conn = http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=30)
        try:
            conn.request(method, full, body=body, headers=h)
            r = conn.getresponse()
            data = r.read()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, data
        finally:
            conn.close()

    def json(self, method, path, body=None, headers=None, base=True):
        status, hdrs, data = self.request(method, path, body, headers, base)
        try:
            doc = json.loads(data) if data else None
        except ValueError:
            doc = None
        return status, hdrs, doc

    def bulk(self, action, ids):
        status, _, doc = self.json("POST", f"/jobs?action={action}", {"job": [{"id": i} for i in ids]})
        if status != 201 or not isinstance(doc, dict) or not isinstance(doc.get("job"), list):
            raise AssertionError(f"bulk {action}: HTTP {status} {doc!r}")
        return doc["job"]

    def submit(self, xrsl, query=""):
        return self.json("POST", f"/jobs?action=new{query}", xrsl, {"Content-Type": "application/rsl"})


def as_list(v):
    return v if isinstance(v, list) else [] if v is None else [v]


def wait_states(c, ids, want, timeout=60):
    """Polls bulk status until every job is in one of the `want` states; returns the last items."""
    deadline = time.time() + timeout
    while True:
        items = c.bulk("status", ids)
        if all(i.get("state") in want for i in items):
            return items
        if time.time() > deadline:
            return items
        time.sleep(0.5)


def token_part(a, ctx):
    c = Client(a.url, ctx, a.token)

    # No credential at all: the versions list is public, everything else 401 with a Bearer challenge.
    anon = Client(a.url, ctx)
    status, _, _ = anon.request("GET", "/rest", base=False)
    check("no credential: versions list is public (200)", status == 200, f"{status}")
    status, hdrs, _ = anon.request("GET", "/rest/1.1/jobs", base=False)
    check("no credential: job list 401 with WWW-Authenticate: Bearer", status == 401 and "bearer" in hdrs.get("www-authenticate", "").lower(), f"{status} {hdrs}")

    # Version negotiation: GET <endpoint>/rest, forced array, take the highest.
    status, _, doc = c.json("GET", "/rest", base=False)
    versions = doc.get("version") if isinstance(doc, dict) else None
    check("versions: 200, forced array", status == 200 and isinstance(versions, list) and "1.0" in versions, f"{status} {doc!r}")
    c.version = max(versions or ["1.0"], key=lambda v: tuple(int(x) for x in v.split(".")))
    check("negotiated version is 1.1", c.version == "1.1", c.version)

    status, _, doc = c.json("GET", "/info")
    check("info: 200 JSON GLUE2 document", status == 200 and isinstance(doc, dict) and "Domains" in json.dumps(doc), f"{status}")

    # A read-only token may look but not submit.
    ro = Client(a.url, ctx, a.read_token)
    ro.version = c.version
    status, _, doc = ro.json("GET", "/jobs")
    check("read-only token: list jobs 200", status == 200, f"{status} {doc!r}")
    status, hdrs, _ = ro.submit('&(executable="/bin/true")')
    check("read-only token: submit 403 insufficient_scope", status == 403 and "insufficient_scope" in hdrs.get("www-authenticate", ""), f"{status} {hdrs}")

    # JWT delegation (1.1): one request, 201 + Location, token stored bare.
    status, hdrs, _ = c.request("POST", "/delegations?action=new&type=jwt", b"", {"X-Token-Delegation": f"Bearer {a.deleg_token}"})
    loc = hdrs.get("location", "")
    did = loc.rstrip("/").rsplit("/", 1)[-1]
    check("jwt delegation: 201 + Location .../delegations/<id>", status == 201 and "/delegations/" in loc and did, f"{status} {hdrs}")
    # E9 get: the stored token as application/jwt, whatever Accept says (pyarcrest's sticky JSON Accept here),
    # to its owner with compute.create; a read-only token of the same subject gets 403 (decisions #36).
    status, hdrs, data = c.request("POST", f"/delegations/{did}?action=get", b"", {"Accept": "application/json"})
    check("jwt delegation get: 200, application/jwt, the stored token", status == 200 and hdrs.get("content-type", "") == "application/jwt"
          and data.decode() == a.deleg_token, f"{status} {hdrs}")
    status, hdrs, data = ro.request("POST", f"/delegations/{did}?action=get", b"")
    check("jwt delegation get with a read-only token: 403, no token", status == 403 and a.deleg_token.split(".")[-1] not in data.decode(), f"{status} {hdrs}")
    status, _, doc = c.json("GET", "/delegations?type=jwt")
    dl = doc.get("delegation") if isinstance(doc, dict) else None
    check("delegation list ?type=jwt: forced array with {id, type}", status == 200 and isinstance(dl, list) and {"id": did, "type": "jwt"} in dl, f"{status} {doc!r}")
    old = Client(a.url, ctx, a.token)  # REST 1.0 knows x509 delegations only; an empty list is still an array
    status, _, doc = old.json("GET", "/delegations")
    check("1.0 delegation list: no jwt delegations, {'delegation': []}", status == 200 and doc == {"delegation": []}, f"{status} {doc!r}")
    status, _, doc = c.json("GET", "/delegations?type=x509")
    check("delegation list ?type=x509 excludes it", status == 200 and did not in [d.get("id") for d in doc.get("delegation", [])], f"{doc!r}")

    # Submission with instances, instances_min and delegation_id.
    xrsl = '&(executable="/bin/echo")(arguments="hello instances")(stdout="out")(outputfiles=("out" ""))(jobname="py-inst")'
    status, _, doc = c.submit(xrsl, f"&instances=3&instances_min=2&delegation_id={did}")
    items = doc.get("job") if isinstance(doc, dict) else None
    check("instances=3: 201 with 3 items (forced array)", status == 201 and isinstance(items, list) and len(items) == 3, f"{status} {doc!r}")
    items = items or []
    check("instances items: status-code '201' strings, ACCEPTING", all(i.get("status-code") == "201" and i.get("state") == "ACCEPTING" and i.get("reason") for i in items), f"{items!r}")
    ids = [i.get("id") for i in items]
    check("instances items: unique ids", len(set(ids)) == 3 and all(ids), f"{ids!r}")

    status, _, doc = c.submit(f"+({xrsl})({xrsl})", "&instances=2")
    check("instances with an array of descriptions -> 403", status == 403, f"{status} {doc!r}")
    n = a.max_per_request
    status, _, doc = c.submit(xrsl, f"&instances={n + 2}&instances_min={n + 1}")
    check(f"instances_min={n + 1} above the per-request limit {n} -> 403", status == 403, f"{status} {doc!r}")
    status, _, doc = c.submit(xrsl, f"&instances={n + 2}")
    capped = [i.get("id") for i in (doc or {}).get("job", []) if i.get("status-code") == "201"]
    check(f"instances={n + 2} without minimum: capped at {n}", status == 201 and len(capped) == n, f"{status} {doc!r}")

    for it in c.bulk("delegations", ids):
        check(f"job {it.get('id')[:8]} bound to the jwt delegation", it.get("status-code") == "200" and as_list(it.get("delegation_id")) == [did], f"{it!r}")

    first = c.bulk("status", ids)
    check("bulk status: '200' items with a state", all(i.get("status-code") == "200" and isinstance(i.get("state"), str) for i in first), f"{first!r}")
    final = wait_states(c, ids + capped, {"FINISHED", "FAILED", "KILLED"})
    check("instances run to FINISHED", all(i.get("state") == "FINISHED" for i in final), f"{final!r}")

    status, _, doc = c.json("GET", "/jobs?state=FINISHED")
    listed = [j.get("id") for j in (doc or {}).get("job", [])]
    check("GET /jobs?state=FINISHED lists them", status == 200 and set(ids) <= set(listed), f"{status} {doc!r}")
    status, _, doc = c.json("GET", "/jobs?state=ACCEPTING,RUNNING")
    check("GET /jobs?state=ACCEPTING,RUNNING: forced array, none of them", status == 200 and isinstance(doc.get("job"), list) and not set(ids) & {j.get("id") for j in doc["job"]}, f"{doc!r}")

    for it in c.bulk("info", ids):
        act = (it.get("info_document") or {}).get("ComputingActivity") or {}
        states = as_list(act.get("State"))
        check(f"info {it.get('id')[:8]}: '200', ComputingActivity.State has arcrest:FINISHED", it.get("status-code") == "200" and "arcrest:FINISHED" in states, f"{it!r}")
        times = {k: v for k, v in act.items() if k.endswith("Time") and not k.startswith(("Requested", "Used"))}
        check(f"info {it.get('id')[:8]}: Name, Queue, ExitCode '0' (strings), GLUE2 times YYYY-MM-DDTHH:MM:SSZ",
              act.get("Name") == "py-inst" and act.get("Queue") == "main" and act.get("ExitCode") == "0" and "EndTime" in times
              and all(isinstance(v, str) and re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", v) for v in times.values())
              and (act.get("_attributes") or {}).get("BaseType") == "Activity", f"{act!r}")

    status, _, data = c.request("GET", f"/jobs/{ids[0]}/session/out", headers={"Accept": "*/*"})
    check("session file: stdout content", status == 200 and data == b"hello instances\n", f"{status} {data!r}")
    status, _, doc = c.json("GET", f"/jobs/{ids[0]}/session/")
    check("session listing: {file: [...], dir: [...]} arrays", status == 200 and "out" in doc.get("file", []) and isinstance(doc.get("dir"), list), f"{doc!r}")

    # Kill a sleeping job by JSON.
    status, _, doc = c.submit('&(executable="/bin/sleep")(arguments="300")(jobname="py-sleep")')
    sid = doc["job"][0]["id"] if status == 201 else None
    check("sleep job submitted (single item still an array)", status == 201 and isinstance(doc.get("job"), list) and sid, f"{status} {doc!r}")
    run = wait_states(c, [sid], {"RUNNING", "FINISHED", "FAILED"})
    check("sleep job RUNNING", run[0].get("state") == "RUNNING", f"{run!r}")
    k = c.bulk("kill", [sid])
    check("bulk kill: '202'", k[0].get("status-code") == "202" and k[0].get("id") == sid, f"{k!r}")
    done = wait_states(c, [sid], {"KILLED", "FINISHED", "FAILED"})
    check("killed job ends KILLED", done[0].get("state") == "KILLED", f"{done!r}")

    mixed = c.bulk("status", [sid, "00000000-0000-4000-8000-000000000000", ids[0]])
    check("bulk status with an unknown id: per-item 200/404/200 in order",
          [i.get("status-code") for i in mixed] == ["200", "404", "200"] and [i.get("id") for i in mixed] == [sid, "00000000-0000-4000-8000-000000000000", ids[0]], f"{mixed!r}")

    # JWT delegation renewal replaces the stored token.
    status, _, _ = c.request("POST", f"/delegations/{did}?action=renew", b"", {"X-Token-Delegation": f"Bearer {a.deleg_token2}"})
    _, _, data = c.request("POST", f"/delegations/{did}?action=get", b"")
    check("jwt delegation renew: 200 and the new token stored (get returns it)", status == 200 and data.decode() == a.deleg_token2, f"{status}")

    every = ids + capped + [sid]
    cl = c.bulk("clean", every)
    check("bulk clean: '202' for every job", all(i.get("status-code") == "202" for i in cl), f"{cl!r}")
    deadline = time.time() + 30
    while time.time() < deadline and any(i.get("status-code") != "404" for i in c.bulk("status", every)):
        time.sleep(0.5)
    check("cleaned jobs are gone (status '404')", all(i.get("status-code") == "404" for i in c.bulk("status", every)))
    status, _, doc = c.json("GET", "/jobs")
    check("job list empty after clean: {'job': []}", status == 200 and doc == {"job": []}, f"{doc!r}")

    status, _, _ = c.request("POST", f"/delegations/{did}?action=delete")
    check("delegation delete: 202", status == 202, f"{status}")
    status, _, _ = c.request("POST", f"/delegations/{did}?action=get")
    check("deleted delegation: 404", status == 404, f"{status}")
    return c


def x509_part(a, ctx, token_client):
    """The same interface with an RFC 3820 proxy as TLS client certificate (no token)."""
    ctx.load_cert_chain(a.proxy)
    c = Client(a.url, ctx)
    c.version = "1.1"
    status, _, doc = c.json("GET", "/rest", base=False)
    check("x509: versions 200", status == 200 and isinstance(doc.get("version"), list), f"{status}")
    status, _, doc = c.submit('&(executable="/bin/echo")(arguments="from a proxy")(stdout="out")(outputfiles=("out" ""))(jobname="py-x509")')
    xid = doc["job"][0].get("id") if status == 201 else None
    check("x509: submit 201", status == 201 and doc["job"][0].get("status-code") == "201" and xid, f"{status} {doc!r}")
    st = wait_states(c, [xid], {"FINISHED", "FAILED", "KILLED"})
    check("x509: job FINISHED", st[0].get("state") == "FINISHED", f"{st!r}")
    status, _, doc = c.json("GET", "/jobs")
    check("x509: job list has only the proxy owner's job", status == 200 and [j.get("id") for j in doc.get("job", [])] == [xid], f"{doc!r}")
    other = token_client.bulk("status", [xid])
    check("token user cannot see the x509 user's job ('404')", other[0].get("status-code") == "404", f"{other!r}")
    status, _, data = c.request("GET", f"/jobs/{xid}/session/out", headers={"Accept": "*/*"})
    check("x509: session file content", status == 200 and data == b"from a proxy\n", f"{status} {data!r}")
    cl = c.bulk("clean", [xid])
    check("x509: clean '202'", cl[0].get("status-code") == "202", f"{cl!r}")


def voms_part(a, cafile):
    """A VOMS proxy (RFC 3820 + AC) on a queue open only to its VO role; the plain proxy is refused there."""
    ctx = ssl.create_default_context(cafile=cafile)
    ctx.load_cert_chain(a.voms_proxy)
    c = Client(a.url, ctx)
    c.version = "1.1"
    q = f"&queue={a.voms_queue}"
    status, _, doc = c.submit('&(executable="/bin/echo")(arguments="vo")(stdout="out")(jobname="py-voms")', q)
    vid = doc["job"][0].get("id") if status == 201 else None
    check("voms: submit to the VO queue '201'", status == 201 and doc["job"][0].get("status-code") == "201" and vid, f"{status} {doc!r}")
    info = c.bulk("info", [vid])
    other = as_list(((info[0].get("info_document") or {}).get("ComputingActivity") or {}).get("OtherInfo"))
    check("voms: activity carries the FQAN", any(str(o).startswith("FQAN=/") for o in other), f"{info!r}")
    plain = ssl.create_default_context(cafile=cafile)
    plain.load_cert_chain(a.proxy)
    pc = Client(a.url, plain)
    pc.version = "1.1"
    status, _, doc = pc.submit('&(executable="/bin/echo")(jobname="py-novoms")', q)
    item = doc["job"][0] if status == 201 else {}
    check("voms: plain proxy refused on the VO queue (per-item '403')", item.get("status-code") == "403" and a.voms_queue in item.get("reason", ""), f"{status} {doc!r}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True, help="service endpoint, e.g. https://localhost:8443/arex")
    p.add_argument("--cafile", required=True)
    p.add_argument("--token", required=True)
    p.add_argument("--read-token", required=True, help="token with compute.read only")
    p.add_argument("--deleg-token", required=True)
    p.add_argument("--deleg-token2", required=True)
    p.add_argument("--proxy", help="X.509 proxy file (cert + key + chain) for the x509 part")
    p.add_argument("--max-per-request", type=int, default=4, help="the CE's jobsPerSubmission limit")
    p.add_argument("--voms-proxy", help="VOMS proxy whose FQAN admits it to --voms-queue")
    p.add_argument("--voms-queue", default="atlasprod")
    a = p.parse_args()
    client = None
    try:
        client = token_part(a, ssl.create_default_context(cafile=a.cafile))
    except Exception as e:  # a broken step must not hide the summary
        check("token part ran to the end", False, repr(e))
    if a.proxy:
        try:
            x509_part(a, ssl.create_default_context(cafile=a.cafile), client or Client(a.url, ssl.create_default_context(cafile=a.cafile), a.token))
        except Exception as e:
            check("x509 part ran to the end", False, repr(e))
    if a.voms_proxy and a.proxy:
        try:
            voms_part(a, a.cafile)
        except Exception as e:
            check("voms part ran to the end", False, repr(e))
    print(f"{PASSED} passed, {FAILED} failed")
    sys.exit(1 if FAILED else 0)


if __name__ == "__main__":
    main()
