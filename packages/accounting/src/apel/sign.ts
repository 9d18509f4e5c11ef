import { Failure } from "@ce/model";
import { spawn } from "node:child_process";

export class SigningError extends Failure<"ACCT_SIGN"> {
  constructor(message: string) {
    super("ACCT_SIGN", message);
  }
}

/**
 * S/MIME signature as APEL's own sender makes it (`openssl smime -sign -text`): the receiver
 * splits MIME header and body at the first blank line and checks the signer against its list.
 */
export function smimeSign(text: string, certFile: string, keyFile: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const p = spawn("openssl", ["smime", "-sign", "-inkey", keyFile, "-signer", certFile, "-text"], { stdio: ["pipe", "pipe", "pipe"] });
    const out: Buffer[] = [],
      err: Buffer[] = [];
    p.stdout.on("data", (b: Buffer) => out.push(b));
    p.stderr.on("data", (b: Buffer) => err.push(b));
    p.on("error", (e) => reject(new SigningError(`openssl cannot be run: ${e.message}`)));
    p.on("close", (code) => {
      if (code === 0) resolve(Buffer.concat(out).toString("utf8"));
      else
        reject(new SigningError(`openssl smime -sign failed (exit ${code}): ${Buffer.concat(err).toString("utf8").trim().slice(0, 500)}`));
    });
    p.stdin.end(text);
  });
}
