import { Failure } from "@ce/model";
import type { CompiledConfig } from "@ce/config";
import { declaredParams, defaultRte, disableRte, enableRte, listRtes, rteParams, rteScript, setRteParams, type RteConfig } from "@ce/store";

/**
 * `ceadm rte …`: the site's runtime environments, as ARC's `arcctl rte` (files under the control
 * dir: rte/enabled, rte/default, rte/params; docs/runtime-environments.md). No Redis needed: the
 * gateway and the JEM read the files at each submission.
 */
export const RTE_USAGE = `  rte list                                                available, enabled and default RTEs
  rte enable <NAME> [FILE]                                may be requested (FILE: script; default: found by name)
  rte default <NAME> [FILE]                               added to every job
  rte disable <NAME>                                      neither enabled nor default
  rte params <NAME> [KEY=value...]                        show or set its parameters (KEY= removes one)
`;

export class RteUsageError extends Failure<"RTE_USAGE"> {
  constructor(message: string) {
    super("RTE_USAGE", message);
  }
}

export function rteCommand(
  config: CompiledConfig,
  args: string[],
  print: (json: unknown, human: () => string) => void,
  table: (headers: string[], rows: (string | number | undefined)[][]) => string,
): number {
  const cfg: RteConfig = { paths: config.paths, jobs: config.jobs };
  const [sub, name, ...rest] = args;
  if (sub === "list") {
    const list = listRtes(cfg);
    print(list, () =>
      table(
        ["NAME", "STATE", "SCRIPT", "PARAMS"],
        list.map((r) => [
          r.name,
          r.default ? "default" : r.enabled ? "enabled" : "available",
          r.script ?? "(missing)",
          r.params.map((p) => `${p.name}=${p.value}`).join(" ") || undefined,
        ]),
      ),
    );
    return 0;
  }
  if (!name) throw new RteUsageError(`rte ${sub ?? ""}: a runtime environment name is required`);
  switch (sub) {
    case "enable":
    case "default": {
      const script = (sub === "enable" ? enableRte : defaultRte)(cfg, name, rest[0]);
      print(
        { name, [sub === "enable" ? "enabled" : "default"]: true, script },
        () => `${name} ${sub === "enable" ? "enabled" : "is a default"}: ${script}`,
      );
      return 0;
    }
    case "disable": {
      const changed = disableRte(cfg, name);
      const configured = config.jobs.runtimeEnvironments.includes(name) || config.jobs.defaultRuntimeEnvironments.includes(name);
      print(
        { name, disabled: changed, configured },
        () =>
          `${name}: ${changed ? "disabled" : "was not enabled here"}${configured ? " (still listed in the configuration: jobs.runtimeEnvironments/defaultRuntimeEnvironments)" : ""}`,
      );
      return 0;
    }
    case "params": {
      const params = rest.length > 0 ? setRteParams(cfg, name, rest) : rteParams(cfg, name);
      const script = rteScript(cfg, name);
      const declared = script ? declaredParams(script) : [];
      const set = new Map(params.map((p) => [p.name, p.value]));
      const names = [...new Set([...declared.map((d) => d.name), ...set.keys()])];
      print({ name, params, declared }, () =>
        table(
          ["PARAM", "VALUE", "DEFAULT", "DESCRIPTION"],
          names.map((n) => {
            const d = declared.find((x) => x.name === n);
            return [n, set.get(n), d?.default || undefined, d?.description];
          }),
        ),
      );
      return 0;
    }
    default:
      throw new RteUsageError(`unknown rte command: ${sub ?? "(none)"}`);
  }
}
