import { existsSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { LaunchContext, PrepStep } from "./types";

/**
 * Steps that install `<pkg>==<version>` into `<dataDir>/runtimes/<kind>/<version>` once: a venv
 * made with `uv` when present, else `python3 -m venv` + pip. A marker file written after success
 * tells a finished install from an interrupted one. Returns the steps and the venv's bin dir.
 */
export function versionInstall(
  ctx: LaunchContext,
  kind: string,
  pkg: string,
  version: string,
): { steps: PrepStep[]; binDir: string } {
  const dir = join(ctx.dataDir, "runtimes", kind, version);
  const binDir = join(dir, "bin");
  const marker = join(dir, ".inferd-installed");
  const done = () => existsSync(marker);
  /** An interrupted install leaves a dir without the marker: start it again from nothing. */
  const clear = () => rmSync(dir, { recursive: true, force: true });
  const uv = ctx.which("uv");
  const spec = `${pkg}==${version}`;
  const steps: PrepStep[] = uv
    ? [
        { title: `create venv for ${spec}`, argv: [uv, "venv", dir], done, before: clear },
        { title: `install ${spec}`, argv: [uv, "pip", "install", "--python", join(binDir, "python"), spec], done },
      ]
    : [
        {
          title: `create venv for ${spec}`,
          argv: [ctx.which("python3") ?? "python3", "-m", "venv", dir],
          done,
          before: clear,
        },
        { title: `install ${spec}`, argv: [join(binDir, "pip"), "install", spec], done },
      ];
  steps[steps.length - 1].after = () => writeFileSync(marker, `${spec}\n${new Date().toISOString()}\n`);
  return { steps, binDir };
}
