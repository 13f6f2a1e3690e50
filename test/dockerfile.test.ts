/**
 * The Dockerfile, checked without Docker (none runs here): it builds with the repository's own
 * build script and Bun version, copies the file that script writes, and starts `inferd` with
 * settings and ports inferd's own parser accepts, as a non-root user, as the Kubernetes manifests
 * expect.
 */
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { DIST, ROOT, TARGETS } from "../build/build";
import { loadConfig, SETTINGS } from "../src/config";
import { render } from "./helpers/kube";
import { repoRoot } from "./helpers/proc";

/** One instruction: its name and its arguments (continuation lines joined). */
interface Instruction {
  op: string;
  args: string;
}

/** The Dockerfile's instructions by stage (`FROM` starts one), comments and blank lines left out. */
function stages(text: string): Instruction[][] {
  const lines = text
    .replace(/\\\n/g, " ")
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith("#"));
  const out: Instruction[][] = [[]];
  for (const line of lines) {
    const [, op, args] = /^(\w+)\s+(.*)$/.exec(line)!;
    if (op.toUpperCase() === "FROM") out.push([]);
    out.at(-1)!.push({ op: op.toUpperCase(), args });
  }
  return out;
}

const dockerfile = stages(readFileSync(join(repoRoot, "Dockerfile"), "utf8"));
const [globals, build, image] = dockerfile;
const pkg = JSON.parse(readFileSync(join(repoRoot, "package.json"), "utf8"));
const one = (stage: Instruction[], op: string) => {
  const found = stage.filter((i) => i.op === op);
  expect(found.length).toBe(1);
  return found[0].args;
};
const json = (args: string) => JSON.parse(args) as string[];
/** `ENV A=1 B=2` of a stage, as a map. */
const envOf = (stage: Instruction[]) =>
  Object.fromEntries(
    stage
      .filter((i) => i.op === "ENV")
      .flatMap((i) => i.args.split(/\s+/).map((kv) => kv.split("=") as [string, string])),
  );

describe("the build stage", () => {
  test("uses the Bun of package.json and installs from the lockfile", () => {
    expect(one(build, "FROM")).toBe(`oven/bun:${pkg.engines.bun} AS build`);
    expect(pkg.packageManager).toBe(`bun@${pkg.engines.bun}`);
    expect(build.some((i) => i.op === "RUN" && i.args === "bun install --frozen-lockfile")).toBe(true);
  });

  test("runs the repository's build for each platform and takes the file it writes", () => {
    const run = build.find((i) => i.op === "RUN" && i.args.includes("bun run build"))!.args;
    expect(pkg.scripts.build).toBe("bun build/build.ts");
    expect(run).toContain('bun run build --target "$target"');
    const mapped = [...run.matchAll(/(\w+)\) target=([\w-]+) ;;/g)].map((m) => [m[1], m[2]]);
    expect(mapped).toEqual([
      ["amd64", "linux-x64"],
      ["arm64", "linux-arm64"],
    ]);
    // The copied path is where build/build.ts writes each target's file.
    const copied = /install -m 0755 "([^"]+)" (\S+)/.exec(run)!;
    for (const [, target] of mapped)
      expect(copied[1].replace("$target", target)).toBe(
        `${relative(ROOT, DIST)}/${TARGETS[target as keyof typeof TARGETS].file}`,
      );
    expect(one(image, "COPY")).toBe(`--from=build ${copied[2]} /usr/local/bin/inferd`);
  });

  test(".dockerignore keeps installed packages, builds and history out, and everything the build reads in", () => {
    const ignored = readFileSync(join(repoRoot, ".dockerignore"), "utf8")
      .split("\n")
      .map((l) => l.trim())
      .filter((l) => l && !l.startsWith("#"));
    expect(ignored).toEqual(expect.arrayContaining([".git", "node_modules", "dist"]));
    for (const needed of ["package.json", "bun.lock", "bunfig.toml", "src", "agent", "ui", "build"])
      expect(ignored).not.toContain(needed);
  });
});

describe("the image", () => {
  test("is a slim Debian by default (or the BASE given), running inferd as a non-root user", () => {
    expect(one(globals, "ARG")).toBe("BASE=debian:bookworm-slim");
    expect(one(image, "FROM")).toBe("${BASE}");
    expect(json(one(image, "ENTRYPOINT"))).toEqual(["inferd"]);
    const [uid, gid] = one(image, "USER").split(":").map(Number);
    expect(uid).toBeGreaterThan(0);
    // The Kubernetes manifests run the same user.
    for (const o of render("base").filter((x) => x.spec?.template)) {
      const c = o.spec.template.spec.containers[0];
      expect([
        o.spec.template.spec.securityContext?.runAsUser ?? c.securityContext?.runAsUser,
        o.spec.template.spec.securityContext?.runAsGroup ?? c.securityContext?.runAsGroup,
      ]).toEqual([uid, gid]);
    }
  });

  test("starts `inferd serve` on every address with its data dir on the volume, with settings inferd reads", () => {
    const env = envOf(image);
    for (const name of Object.keys(env)) expect(Object.values(SETTINGS).map((s) => s.env)).toContain(name);
    const { config, rest } = loadConfig(json(one(image, "CMD")), env);
    expect(rest).toEqual(["serve"]);
    expect(config.host).toBe("0.0.0.0");
    expect(one(image, "VOLUME")).toBe(config.dataDir);
    // The HTTP port and the agents' HTTPS port (--tls-port defaults to --port + 1).
    expect(one(image, "EXPOSE").split(/\s+/).map(Number)).toEqual([config.port, config.port + 1]);
    expect(config.tlsPort).toBeUndefined();
  });
});
