/**
 * The built-in llama.cpp runtime's pack (agent/runtimes/llama/pack.ts), how the build makes it
 * (build/llama-pack.ts) and how builtin.ts picks source mode, the unpacked copy or a clear error.
 * The compiled binary running it end to end is in binary.test.ts.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { builtinLlama, builtinLlamaDir } from "../agent/runtimes/builtin";
import { COMPLETE_MARKER, encodePack, readPackIndex, unpackOnce, type PackInput } from "../agent/runtimes/llama/pack";
import { buildLlamaPack, packMode, packModules } from "../build/llama-pack";
import { cleanup, repoRoot, tempDir } from "./helpers/proc";

afterAll(cleanup);

/** A pack of `count` files (a few of them executable), written to a temp file. */
function samplePack(count = 40, salt = "a"): { path: string; inputs: PackInput[]; id: string } {
  const inputs: PackInput[] = [
    {
      path: "llama-runner.js",
      bytes: new TextEncoder().encode(`console.log(${JSON.stringify(salt)});\n`),
      mode: 0o644,
    },
  ];
  for (let i = 0; i < count; i++) {
    const bytes = new Uint8Array(1000 + i * 997);
    for (let j = 0; j < bytes.length; j++) bytes[j] = (i * 31 + j * 7) & 0xff;
    inputs.push({
      path: `node_modules/pkg${i % 5}/lib/file${i}${i % 10 === 0 ? ".node" : ".js"}`,
      bytes,
      mode: i % 10 === 0 ? 0o755 : 0o644,
    });
  }
  const { bytes, index } = encodePack(inputs, { label: "test" });
  const path = join(tempDir("pack"), "runtime.pack");
  writeFileSync(path, bytes);
  return { path, inputs, id: index.id };
}

/** Every file of `inputs` is in `dir` with its bytes and mode. */
function expectUnpacked(dir: string, inputs: PackInput[]): void {
  for (const f of inputs) {
    const p = join(dir, f.path);
    expect(Buffer.compare(readFileSync(p), Buffer.from(f.bytes))).toBe(0);
    expect(statSync(p).mode & 0o777).toBe(f.mode);
  }
}

/** A pid that no longer runs (a process that already exited). */
async function deadPid(): Promise<number> {
  const p = Bun.spawn(["true"]);
  await p.exited;
  return p.pid;
}

describe("the pack format", () => {
  test("keeps the index outside the compressed data, with a content id", () => {
    const a = samplePack(3);
    const index = readPackIndex(readFileSync(a.path));
    expect(index.id).toBe(a.id);
    expect(index.id).toMatch(/^test-[0-9a-f]{16}$/);
    expect(index.files.map((f) => f.path)).toEqual(a.inputs.map((f) => f.path));
    expect(samplePack(3).id).toBe(a.id);
    expect(samplePack(3, "b").id).not.toBe(a.id);
  });

  test("refuses unsafe paths and files that are not packs", () => {
    expect(() => encodePack([{ path: "../evil", bytes: new Uint8Array(1), mode: 0o644 }], { label: "x" })).toThrow(
      "unsafe path",
    );
    expect(() => encodePack([{ path: "/etc/passwd", bytes: new Uint8Array(1), mode: 0o644 }], { label: "x" })).toThrow(
      "unsafe path",
    );
    expect(() => readPackIndex(new TextEncoder().encode("PK\x03\x04 a zip file"))).toThrow("not a valid inferd pack");
  });
});

describe("unpackOnce", () => {
  test("unpacks every file with its mode once, then finds it complete", () => {
    const pack = samplePack();
    const base = join(tempDir("unpack"), "builtin-llama");
    const first = unpackOnce(pack.path, base);
    expect(first).toEqual({ dir: join(base, pack.id), id: pack.id, unpacked: true });
    expectUnpacked(first.dir, pack.inputs);
    expect(readdirSync(base)).toEqual([pack.id]);
    expect(unpackOnce(pack.path, base).unpacked).toBe(false);
  });

  test("redoes an interrupted unpack: removes dead leftovers and replaces a copy without its marker", async () => {
    const pack = samplePack();
    const base = join(tempDir("unpack"), "builtin-llama");
    const leftover = join(base, `.unpack-${await deadPid()}-abc123`);
    mkdirSync(join(leftover, "node_modules"), { recursive: true });
    writeFileSync(join(leftover, "llama-runner.js"), "half");
    const damaged = join(base, pack.id);
    mkdirSync(damaged, { recursive: true });
    writeFileSync(join(damaged, "llama-runner.js"), "half");
    const r = unpackOnce(pack.path, base);
    expect(r.unpacked).toBe(true);
    expectUnpacked(r.dir, pack.inputs);
    expect(readdirSync(base)).toEqual([pack.id]);
  });

  test("a new pack replaces the old version's dir", () => {
    const base = join(tempDir("unpack"), "builtin-llama");
    const old = samplePack(5, "old");
    unpackOnce(old.path, base);
    const next = samplePack(5, "new");
    const r = unpackOnce(next.path, base);
    expect(readdirSync(base)).toEqual([next.id]);
    expect(readFileSync(join(r.dir, "llama-runner.js"), "utf8")).toContain("new");
  });

  test("concurrent unpacks by several processes end with one complete copy", async () => {
    const pack = samplePack(200);
    const base = join(tempDir("unpack"), "builtin-llama");
    const script = join(tempDir("script"), "unpack.ts");
    writeFileSync(
      script,
      `import { unpackOnce } from ${JSON.stringify(join(repoRoot, "agent/runtimes/llama/pack.ts"))};\nconsole.log(JSON.stringify(unpackOnce(process.argv[2], process.argv[3])));\n`,
    );
    const procs = Array.from({ length: 4 }, () =>
      Bun.spawn([process.execPath, script, pack.path, base], { stdout: "pipe", stderr: "pipe" }),
    );
    const results = await Promise.all(
      procs.map(async (p) => {
        const [out, err, code] = await Promise.all([
          new Response(p.stdout).text(),
          new Response(p.stderr).text(),
          p.exited,
        ]);
        if (code !== 0) throw new Error(`unpack exited ${code}: ${err}`);
        return JSON.parse(out) as { dir: string; unpacked: boolean };
      }),
    );
    expect(new Set(results.map((r) => r.dir))).toEqual(new Set([join(base, pack.id)]));
    expect(results.filter((r) => r.unpacked).length).toBeGreaterThanOrEqual(1);
    expectUnpacked(join(base, pack.id), pack.inputs);
    expect(readdirSync(base)).toEqual([pack.id]);
  });
});

describe("builtinLlama", () => {
  test("from source runs llama-runner.ts with this Bun and no extra env", () => {
    expect(builtinLlama(tempDir("data"), {}, false)).toEqual({
      argv: [process.execPath, join(repoRoot, "agent/runtimes/llama-runner.ts")],
      env: {},
    });
  });

  test("in a compiled binary unpacks into the data dir and runs the binary as Bun", () => {
    const pack = samplePack(5);
    const data = tempDir("data");
    const dir = join(builtinLlamaDir(data), pack.id);
    const launch = builtinLlama(data, { path: pack.path }, true);
    expect(launch).toEqual({
      argv: [process.execPath, join(dir, "llama-runner.js")],
      env: { BUN_BE_BUN: "1", INFERD_NODE_MODULES: join(dir, "node_modules") },
    });
    expect(readFileSync(join(dir, COMPLETE_MARKER), "utf8")).toBe(pack.id);
    // Removed behind its back (a user cleaning the data dir): the next launch unpacks again.
    rmSync(dir, { recursive: true, force: true });
    expect(builtinLlama(data, { path: pack.path }, true)).toEqual(launch);
    expect(existsSync(join(dir, "llama-runner.js"))).toBe(true);
  });

  test("in a build without a pack for its platform says so and what to do", () => {
    expect(() =>
      builtinLlama(tempDir("data"), { unavailable: "@node-llama-cpp/mac-arm64-metal was not installed" }, true),
    ).toThrow(
      /no built-in llama\.cpp runtime for .*@node-llama-cpp\/mac-arm64-metal was not installed.*install llama\.cpp's llama-server on PATH/,
    );
  });

  test("a pack that cannot be read fails the launch with the unpack dir in the message", () => {
    const bad = join(tempDir("pack"), "bad.pack");
    writeFileSync(bad, "not a pack");
    const data = tempDir("data");
    expect(() => builtinLlama(data, { path: bad }, true)).toThrow(
      `cannot unpack the built-in llama.cpp runtime into ${builtinLlamaDir(data)}: not a valid inferd pack`,
    );
  });
});

describe("the build's pack", () => {
  test("holds the bundled runner and node-llama-cpp with this platform's binaries; other platforms get a reason", async () => {
    const pack = await buildLlamaPack(repoRoot, "linux", "x64");
    if ("unavailable" in pack) throw new Error(pack.unavailable);
    const index = readPackIndex(pack.bytes);
    const paths = new Set(index.files.map((f) => f.path));
    expect(paths.has("llama-runner.js")).toBe(true);
    expect(paths.has("node_modules/node-llama-cpp/package.json")).toBe(true);
    expect(index.files.find((f) => f.path.endsWith("/linux-x64/llama-addon.node"))?.mode).toBe(0o755);
    expect(index.files.some((f) => f.path.includes("gitRelease.bundle") || f.path.endsWith(".d.ts"))).toBe(false);
    expect(index.files.find((f) => f.path === "llama-runner.js")!.size).toBeLessThan(200_000);

    const none = await buildLlamaPack(repoRoot, "win32", "x64");
    expect(none).toEqual({ unavailable: expect.stringContaining("@node-llama-cpp/win-x64") });
    const modules = packModules(repoRoot, none);
    expect(Object.keys(modules)).toEqual([join(repoRoot, "agent/runtimes/llama/embedded-pack.ts")]);
  });

  test("native libraries and executables get 0755, other files 0644", () => {
    expect(packMode("a/llama-addon.node", 0o644)).toBe(0o755);
    expect(packMode("a/libggml.so", 0o644)).toBe(0o755);
    expect(packMode("a/libfoo.so.1", 0o644)).toBe(0o755);
    expect(packMode("a/bin/tool", 0o755)).toBe(0o755);
    expect(packMode("a/index.js", 0o664)).toBe(0o644);
  });
});
