import { mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { loadSecretBox, SecretBox } from "./secretbox.js";

const root = mkdtempSync(join(tmpdir(), "ce-secretbox-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const cfg = (d: { encryptionKey?: string; encryptionKeyFile?: string }, stateDir = join(root, "state")) => ({
  delegations: d,
  paths: { stateDir },
});

describe("loadSecretBox (one loader for the gateway and the JEM)", () => {
  it("uses the configured key, and names the setting when it is not 32 bytes", () => {
    const key = SecretBox.generateKey();
    const sealed = new SecretBox(key).seal("s", "aad");
    expect(loadSecretBox(cfg({ encryptionKey: key })).open(sealed, "aad")).toBe("s");
    expect(() => loadSecretBox(cfg({ encryptionKey: "c2hvcnQ=" }))).toThrow(/delegations\.encryptionKey: .*32 bytes/);
  });

  it("never invents a key for a configured file that is missing", () => {
    const file = join(root, "nope.key");
    expect(() => loadSecretBox(cfg({ encryptionKeyFile: file }))).toThrow(`delegations.encryptionKeyFile ${file} does not exist`);
    writeFileSync(file, "bad\n");
    expect(() => loadSecretBox(cfg({ encryptionKeyFile: file }))).toThrow(new RegExp(`${file}: .*32 bytes`));
  });

  it("creates the development key once (0600, parent made), tells only its creator, and every later loader reads it", () => {
    const stateDir = join(root, "fresh", "state");
    const told: string[] = [];
    const a = loadSecretBox(cfg({}, stateDir), (f) => told.push(f));
    const b = loadSecretBox(cfg({}, stateDir), (f) => told.push(f));
    expect(told).toEqual([join(stateDir, "delegation.key")]);
    expect(statSync(told[0]!).mode & 0o777).toBe(0o600);
    expect(b.open(a.seal("x"))).toBe("x");
  });
});
