import { existsSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { PinnedInstall } from "../engines/types";
import type { LaunchContext, PrepStep } from "./types";

/**
 * Steps that install an engine's pinned version (`what`: its requirement, the extra requirements
 * the launch needs, whether pre-releases are allowed) into `<dataDir>/runtimes/<backend>/<version>`
 * once: a venv made with `uv` when present, else `python3 -m venv` + pip. A marker file written
 * after success tells a finished install from an interrupted one. Returns the steps and the venv's bin dir.
 */
export function versionInstall(
  ctx: LaunchContext,
  backend: string,
  version: string,
  what: PinnedInstall,
): { steps: PrepStep[]; binDir: string } {
  // A launch that needs more than the engine (Ray) gets a venv of its own beside the plain one.
  const extras = what.extra.map((e) => e.replace(/[^A-Za-z0-9.=-]+/g, "-")).join("+");
  const dir = join(ctx.dataDir, "runtimes", backend, extras ? `${version}+${extras}` : version);
  const binDir = join(dir, "bin");
  const marker = join(dir, ".inferd-installed");
  const done = () => existsSync(marker);
  /** An interrupted install leaves a dir without the marker: start it again from nothing. */
  const clear = () => rmSync(dir, { recursive: true, force: true });
  const uv = ctx.which("uv");
  const spec = [what.requirement, ...what.extra];
  const title = `install ${spec.join(" ")}`;
  const steps: PrepStep[] = uv
    ? [
        { title: `create venv for ${what.requirement}`, argv: [uv, "venv", dir], done, before: clear },
        {
          title,
          argv: [
            uv,
            "pip",
            "install",
            "--python",
            join(binDir, "python"),
            ...(what.prerelease ? ["--prerelease=allow"] : []),
            ...spec,
          ],
          done,
        },
      ]
    : [
        {
          title: `create venv for ${what.requirement}`,
          argv: [ctx.which("python3") ?? "python3", "-m", "venv", dir],
          done,
          before: clear,
        },
        { title, argv: [join(binDir, "pip"), "install", ...(what.prerelease ? ["--pre"] : []), ...spec], done },
      ];
  steps[steps.length - 1].after = () => writeFileSync(marker, `${spec.join(" ")}\n${new Date().toISOString()}\n`);
  return { steps, binDir };
}
