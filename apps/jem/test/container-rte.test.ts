import { execFile } from "node:child_process";
import { chmod, chown, mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { lookupAccounts } from "@ce/mapping";
import type { LocalUser } from "@ce/model";
import { enableRte, setRteParams, SHIPPED_RTE_DIR, type RteConfig } from "@ce/store";
import { TestAccounts } from "@ce/mapping/testing";
import { HAS_CONTAINER_TOOLS, testImage, type TestImage } from "@ce/testing/container-image";
import type { Jem } from "../src/daemon.js";
import { output, shellJob, submitTestJob, testEnv, testJem, waitForRest, type TestEnv } from "./helpers.js";

// The shipped ENV/CONTAINER RTE on the fork back end, with mapping on: the payload runs in an
// image mmdebstrap built (cached per machine, @ce/testing/container-image), as the job's
// mapped account, the session bind-mounted at its own path; other RTEs' stages 1 and 2 still run
// around it; a missing image or runtime fails the job with the reason the user reads.

if (!HAS_CONTAINER_TOOLS)
  console.warn("container-rte.test.ts SKIPPED: needs root, bubblewrap and mmdebstrap (scripts/ensure-system-deps.sh container)");

describe.skipIf(!HAS_CONTAINER_TOOLS)("ENV/CONTAINER: the payload in its image", () => {
  const accounts = new TestAccounts();
  let env: TestEnv;
  let jem: Jem;
  let image: TestImage;
  let localUser: LocalUser;
  let rte: RteConfig;

  beforeAll(async () => {
    image = await testImage();
    if (image.buildMs) console.log(`container-rte.test.ts: built the test image ${image.dir} in ${image.buildMs} ms`);
    const acct = await accounts.add("ct");
    const a = (await lookupAccounts([acct])).get(acct)!;
    localUser = { account: acct, uid: a.uid, gid: a.gid, groups: [a.gid], rule: "mapping.rules[0]" };
    env = await testEnv({ mapping: { rules: [{ name: "test", match: ["*"], user: acct }] } });
    await chmod(env.stateDir, 0o711); // mapped accounts reach their session dirs by path
    rte = {
      paths: { controlDir: env.config.paths.controlDir, rteDir: env.config.paths.rteDir },
      jobs: { runtimeEnvironments: [], defaultRuntimeEnvironments: [] },
    };
    // Found by name among the shipped RTEs, as `ceadm rte enable ENV/CONTAINER` finds it.
    expect(enableRte(rte, "ENV/CONTAINER")).toBe(join(SHIPPED_RTE_DIR, "ENV", "CONTAINER"));
    setRteParams(rte, "ENV/CONTAINER", [`CONTAINER_IMAGES=${image.images}`]);
    // A site RTE around the container: stage 1 exports for the payload, stage 2 runs after it.
    await mkdir(join(env.config.paths.rteDir, "SITE"), { recursive: true, mode: 0o755 });
    await chmod(env.config.paths.rteDir, 0o755);
    await writeFile(
      join(env.config.paths.rteDir, "SITE", "STAGES"),
      'case "$1" in 1) export STAGE1_SAYS=hello ;; 2) echo "stage 2 after $STAGE1_SAYS" > stage2.txt ;; esac\ntrue\n',
      { mode: 0o644 },
    );
    jem = await testJem(env);
  }, 330_000);

  afterAll(async () => {
    await jem?.stop();
    await env?.close();
    await accounts.remove();
  });

  // The session keeps only declared outputs once the job is done.
  const KEPT = ["out.txt", "err.txt", "made-in-image.txt", "stage2.txt"];
  const container = (options: string[] = []) => ({ name: "ENV/CONTAINER", options });
  const submit = (script: string, rtes: Array<{ name: string; options: string[] }>, extra: Record<string, unknown> = {}) =>
    submitTestJob(
      env,
      shellJob(script, {
        runtimeEnvironments: rtes,
        stdout: "out.txt",
        stderr: "err.txt",
        outputFiles: KEPT.map((f) => output(f, { useIfFailure: true })),
        ...extra,
      }),
      { localUser },
    );

  it("runs in the image as the mapped account, writes into the session, sees the job's environment and stage 1", async () => {
    const id = await submit(
      [
        "cat /etc/ce-test-image",
        "id -u",
        '. /etc/os-release && echo "$ID $VERSION_ID"',
        'echo "$FROM_JOB|$STAGE1_SAYS"',
        // The host's own tree (this repository) is not there: only the image, the session, /proc, /dev, /tmp.
        `test -e ${JSON.stringify(process.cwd())} && echo host-visible || echo host-hidden`,
        "echo written > made-in-image.txt",
      ].join("\n"),
      [{ name: "SITE/STAGES", options: [] }, container([image.name])],
      { environment: [{ name: "FROM_JOB", value: "a b 'c'" }] },
    );
    const r = await waitForRest(env, id, ["FINISHED", "FAILED"], 30_000);
    const session = env.control.sessionDir(id);
    expect(r?.failure, await readFile(join(session, "err.txt"), "utf8").catch(() => "")).toBeUndefined();
    expect(await readFile(join(session, "out.txt"), "utf8")).toBe(
      `${image.marker}${localUser.uid}\ndebian 12\na b 'c'|hello\nhost-hidden\n`,
    );
    expect(localUser.uid).not.toBe(0);
    expect((await stat(join(session, "made-in-image.txt"))).uid).toBe(localUser.uid);
    expect(await readFile(join(session, "stage2.txt"), "utf8")).toBe("stage 2 after hello\n");
  }, 40_000);

  it("the payload's exit code is the job's; an image enabled under a name of its own needs no option", async () => {
    // One image per RTE name (published in GLUE2 each): the same script, its own parameters.
    enableRte(rte, "IMAGE/BUSYBOX", join(SHIPPED_RTE_DIR, "ENV", "CONTAINER"));
    setRteParams(rte, "IMAGE/BUSYBOX", [`CONTAINER_IMAGES=${image.images}`, `CONTAINER_IMAGE=${image.name}`]);
    const id = await submit("cat /etc/ce-test-image; exit 7", [{ name: "IMAGE/BUSYBOX", options: [] }]);
    const r = await waitForRest(env, id, ["FINISHED", "FAILED"], 30_000);
    expect(r?.exitCode).toBe(7);
    expect(r?.failure).toMatch(/exited with code 7/);
    expect(await readFile(join(env.control.sessionDir(id), "out.txt"), "utf8")).toBe(image.marker);
  }, 40_000);

  it("a session under a directory the image has (/var/tmp) is mounted there without writing into the image; --network no leaves loopback only", async () => {
    // The launcher as the batch job runs it, as the account, without the JEM: the mount layout is the subject.
    const session = await mkdtemp("/var/tmp/ce-ctr-");
    try {
      await chown(session, localUser.uid, localUser.gid);
      const before = await readdir(join(image.dir, "var", "tmp"));
      const { stdout } = await promisify(execFile)(
        "setpriv",
        [
          `--reuid=${localUser.uid}`,
          `--regid=${localUser.gid}`,
          "--clear-groups",
          "/bin/bash",
          join(SHIPPED_RTE_DIR, "ENV", "CONTAINER"),
          "container-exec",
          "/usr/bin/bwrap",
          image.dir,
          "no",
          session,
          "",
          "--",
          "/bin/sh",
          "-c",
          `pwd; cat /etc/ce-test-image; echo in > made.txt; awk -F: 'NR > 2 { gsub(/ /, "", $1); print $1 }' /proc/net/dev`,
        ],
        { cwd: session },
      );
      expect(stdout).toBe(`${session}
${image.marker}lo
`);
      expect(await readFile(join(session, "made.txt"), "utf8")).toBe("in\n");
      expect(await readdir(join(image.dir, "var", "tmp"))).toEqual(before);
    } finally {
      await rm(session, { recursive: true, force: true });
    }
  });

  it("a missing image, a bad image name or a missing runtime fails the job with the reason", async () => {
    const failureOf = async (rtes: Array<{ name: string; options: string[] }>) => {
      const id = await submit("echo ran", rtes);
      const r = await waitForRest(env, id, ["FINISHED", "FAILED"], 30_000);
      expect(await readFile(join(env.control.sessionDir(id), "out.txt"), "utf8").catch(() => "")).toBe("");
      return r?.failure ?? "";
    };
    expect(await failureOf([container(["no-such-image"])])).toMatch(/ENV\/CONTAINER: image "no-such-image" not found/);
    expect(await failureOf([container(["../../etc"])])).toMatch(/ENV\/CONTAINER: image name "..\/..\/etc" is not valid/);
    expect(await failureOf([container()])).toMatch(/ENV\/CONTAINER: no image: name one as the option/);
    setRteParams(rte, "ENV/CONTAINER", ["CONTAINER_RUNTIME=/nonexistent/bwrap"]);
    try {
      expect(await failureOf([container([image.name])])).toMatch(
        /ENV\/CONTAINER: the container runtime is not installed on .*: no executable \/nonexistent\/bwrap/,
      );
    } finally {
      setRteParams(rte, "ENV/CONTAINER", ["CONTAINER_RUNTIME="]);
    }
  }, 60_000);
});
