import { readFile, stat } from "node:fs/promises";
import { describe, expect, it } from "vitest";
import { lookupAccounts } from "@ce/mapping";
import { transferClient } from "../http.js";
import { toolRunner } from "../tools.js";
import { xrdCredentialEnv, xrootdTokenRefusal } from "./xrootd-auth.js";

const jwt = (aud: unknown) => {
  const part = (o: object) => Buffer.from(JSON.stringify(o)).toString("base64url");
  return `${part({ alg: "RS256" })}.${part({ sub: "u", aud })}.c2ln`;
};
const nobody = (async () => (process.geteuid?.() === 0 ? (await lookupAccounts(["nobody"])).get("nobody") : undefined))();
// As root, the tools run as an account (here `nobody`); unprivileged, as this process.
const tools = toolRunner(async () => {
  const a = await nobody;
  return a && { uid: a.uid, gid: a.gid, wrap: (file: string, args: string[]) => ({ file, args }), env: (x: Record<string, string>) => x };
});
const opts = { connectTimeoutMs: 1000, idleTimeoutMs: 1000, tools };

describe("xrootd credentials", () => {
  it("sends a token only to the xrootd endpoint it names (root/roots/https/davs forms, default ports)", () => {
    expect(xrootdTokenRefusal(jwt("roots://se.example.org:1094"), "root://se.example.org//f", false)).toBeUndefined();
    expect(xrootdTokenRefusal(jwt(["x", "https://se.example.org:1094"]), "roots://SE.example.org:1094//f", false)).toBeUndefined();
    expect(xrootdTokenRefusal(jwt("https://se.example.org"), "root://se.example.org//f", false)).toMatch(/not the token's audience/);
    expect(xrootdTokenRefusal(jwt("roots://other.example.org:1094"), "root://se.example.org//f", false)).toMatch(
      /not the token's audience/,
    );
    expect(xrootdTokenRefusal(jwt("https://wlcg.cern.ch/jwt/v1/any"), "root://se.example.org//f", false)).toMatch(/any-audience/);
    expect(xrootdTokenRefusal(jwt("https://wlcg.cern.ch/jwt/v1/any"), "root://se.example.org//f", true)).toBeUndefined();
    expect(xrootdTokenRefusal("not-a-jwt", "root://se.example.org//f", true)).toMatch(/no audience/);
  });

  it("gives xrdcp only the job's token, privately, and no path to the JEM's own credentials", async () => {
    const token = jwt("roots://se.example.org:1094");
    const client = transferClient({ type: "jwt", token } as never, { ...opts, certDir: "/etc/grid-security/certificates" });
    const { env, presents, cleanup } = await xrdCredentialEnv(client, "roots://se.example.org//f");
    try {
      expect(presents).toBe("the job's token (ztn)");
      expect(env.XrdSecPROTOCOL).toBe("ztn");
      expect(env.X509_CERT_DIR).toBe("/etc/grid-security/certificates");
      expect((await readFile(env.BEARER_TOKEN_FILE!, "utf8")).trim()).toBe(token);
      expect((await stat(env.BEARER_TOKEN_FILE!)).mode & 0o077).toBe(0);
      // The account's own (or this process's), and nobody else's.
      const owner = (await nobody)?.uid ?? process.geteuid?.();
      expect((await stat(env.BEARER_TOKEN_FILE!)).uid).toBe(owner);
      expect((await stat(env.HOME!)).uid).toBe(owner);
      expect((await stat(env.HOME!)).mode & 0o077).toBe(0);
      for (const k of ["X509_USER_PROXY", "X509_USER_CERT", "X509_USER_KEY", "HOME", "XDG_RUNTIME_DIR"]) expect(env[k]).toMatch(/ce-tool-/);
      expect(env.BEARER_TOKEN).toBeUndefined();
    } finally {
      await cleanup();
      await client.close();
    }
    await expect(stat(env.BEARER_TOKEN_FILE!)).rejects.toThrow();
    const none = transferClient(undefined, opts);
    const anon = await xrdCredentialEnv(none, "root://se.example.org//f");
    expect(anon.env.XrdSecPROTOCOL).toBe("gsi");
    await expect(stat(anon.env.X509_USER_PROXY!)).rejects.toThrow();
    await anon.cleanup();
    await none.close();
    await expect(
      xrdCredentialEnv(transferClient({ type: "jwt", token } as never, opts), "root://elsewhere.example.org//f"),
    ).rejects.toThrow(/token not sent/);
  });
});
