import { spawnSync } from "node:child_process";
import { createPrivateKey, X509Certificate } from "node:crypto";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { issueUserCert } from "@ce/x509/testing";
import type { Stack } from "./stack.js";
import { waitFor } from "./wait.js";

/** A grid user's certificate and key files. */
export interface StackUser {
  cert: string;
  key: string;
}

/** Another grid identity: a user certificate signed by the stack's development CA, in the stack's state dir. */
export function issueStackUser(stack: Stack, cn: string): StackUser {
  const certPem = readFileSync(join(stack.pki, "ca", "ca.pem"), "utf8");
  const keyPem = readFileSync(join(stack.pki, "ca-private", "ca.key"), "utf8");
  const ca = { certPem, keyPem, cert: new X509Certificate(certPem), key: createPrivateKey(keyPem) } as Parameters<typeof issueUserCert>[0];
  const u = issueUserCert(ca, { dn: `/DC=org/DC=ce-dev/O=Users/CN=${cn}` });
  const dir = join(stack.state, "creds", cn.replace(/\W/g, "_"));
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "cert.pem"), u.certPem);
  writeFileSync(join(dir, "key.pem"), u.keyPem, { mode: 0o600 });
  return { cert: join(dir, "cert.pem"), key: join(dir, "key.pem") };
}

export interface Reply {
  status: number;
  body: string;
}

/**
 * The REST interface (1.1, JSON) of a whole-CE stack as one user sees it, through curl with that
 * user's certificate: what a grid client sends, nothing of the CE's own code in between.
 */
export function stackClient(stack: Stack, user: StackUser) {
  const api = `${stack.url}/rest/1.1`;
  const curl = (args: string[], body = ""): Reply => {
    const r = spawnSync(
      "curl",
      ["-s", "-w", "\n%{http_code}", "--cacert", join(stack.pki, "ca", "ca.pem"), "--cert", user.cert, "--key", user.key, ...args],
      { encoding: "utf8", input: body },
    );
    const i = r.stdout.lastIndexOf("\n");
    return { status: Number(r.stdout.slice(i + 1)), body: r.stdout.slice(0, i) };
  };
  const post = (query: string, contentType: string, body: string) =>
    curl(
      ["-X", "POST", "-H", `Content-Type: ${contentType}`, "-H", "Accept: application/json", "--data-binary", "@-", `${api}/jobs?${query}`],
      body,
    );
  /** A bulk action on one job. */
  const action = (name: string, id: string) => post(`action=${name}`, "application/json", JSON.stringify({ job: [{ id }] }));
  const state = (id: string) => (JSON.parse(action("status", id).body) as { job: Array<{ state?: string }> }).job[0]?.state ?? "?";
  return {
    api,
    curl,
    action,
    state,
    /** Submits one xRSL job: its id when the item was accepted, and the reply either way. */
    submit(xrsl: string): Reply & { id?: string } {
      const r = post("action=new", "application/rsl", xrsl);
      let id: string | undefined;
      try {
        id = (JSON.parse(r.body) as { job?: Array<{ id?: string }> }).job?.[0]?.id;
      } catch {
        id = undefined;
      }
      return { ...r, ...(id ? { id } : {}) };
    },
    /** Polls the job's REST state until it is one of `want`; on timeout, names the state it is in and the stack's log tail. */
    waitState(id: string, want: string[], ms = 90_000, everyMs = 500): Promise<string> {
      return waitFor(`job ${id} in ${want.join("/")}`, () => (want.includes(state(id)) ? state(id) : undefined), ms, {
        everyMs,
        detail: () => `it is ${state(id)}\n${stack.logs().slice(-3000)}`,
      });
    },
  };
}
