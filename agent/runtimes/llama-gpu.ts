/**
 * The GPU build of the built-in llama.cpp runtime. The compiled binary packs node-llama-cpp with its
 * CPU binaries only (the CUDA build alone is ~180 MB); on a machine whose GPUs call for another build
 * (`@node-llama-cpp/<platform>-cuda` for NVIDIA, `-vulkan` for other GPUs; on macOS arm64 the packed
 * build already is Metal), the first launch fetches that package, at node-llama-cpp's own version,
 * from the npm registry into `<data-dir>/runtimes/llama-gpu/<version>/node_modules/`, checks its
 * sha512 against the registry's `dist.integrity`, unpacks it, and points the runner at it
 * (NODE_PATH, where node-llama-cpp's `import("@node-llama-cpp/…")` finds it). A package already
 * installed next to node-llama-cpp (from source, `bun install` installs the host's) is used as is.
 * Whatever fails (offline, a bad checksum, no build for this platform) leaves the runner on the CPU
 * with the reason, which its log and the replica's row show.
 */
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { dirname, join } from "node:path";
import { Progress } from "../models/progress";
import type { GpuInfo, TransferProgress } from "../protocol";
import { GPU_ENV, GPU_NAMES, GPU_UNAVAILABLE_ENV, type LlamaGpuType } from "./llama/gpu-env";

/** builtin.ts's node_modules variable (the compiled binary's unpacked node-llama-cpp). */
const NODE_MODULES_ENV = "INFERD_NODE_MODULES";

/** The registry npm itself would use: `npm_config_registry` (any case), else registry.npmjs.org. */
export function npmRegistry(env: Record<string, string | undefined>): string {
  return (env.npm_config_registry || env.NPM_CONFIG_REGISTRY || "https://registry.npmjs.org").replace(/\/+$/, "");
}

/**
 * The GPU build for GPUs of these vendors on this platform: its type and the package holding it
 * (null: built into the packed CPU package), `{unavailable}` when node-llama-cpp has none, or null
 * when there is no GPU to use.
 * @example gpuBuildFor([{ vendor: "nvidia" }], "linux", "x64") // → { gpu: "cuda", pkg: "@node-llama-cpp/linux-x64-cuda" }
 */
export function gpuBuildFor(
  gpus: Pick<GpuInfo, "vendor">[],
  platform: string = process.platform,
  arch: string = process.arch,
): { gpu: LlamaGpuType; pkg: string | null } | { unavailable: string } | null {
  if (platform === "darwin" && arch === "arm64") return { gpu: "metal", pkg: null };
  if (gpus.length === 0) return null;
  const gpu: LlamaGpuType = gpus.some((g) => g.vendor === "nvidia") ? "cuda" : "vulkan";
  if ((platform === "linux" || platform === "win32") && arch === "x64")
    return { gpu, pkg: `@node-llama-cpp/${platform === "win32" ? "win" : "linux"}-x64-${gpu}` };
  return { unavailable: `node-llama-cpp has no ${GPU_NAMES[gpu]} build for ${platform}-${arch}` };
}

/** The node_modules dir the runner loads node-llama-cpp from: the unpacked pack's, else the checkout's. */
export function runnerNodeModules(launchEnv: Record<string, string>, from: string = import.meta.dir): string | null {
  if (launchEnv[NODE_MODULES_ENV]) return launchEnv[NODE_MODULES_ENV];
  for (let dir = from; ; dir = dirname(dir)) {
    if (existsSync(join(dir, "node_modules", "node-llama-cpp", "package.json"))) return join(dir, "node_modules");
    if (dirname(dir) === dir) return null;
  }
}

/** The `version` of `<nodeModules>/<pkg>/package.json`, or null when it is not there. */
function installedVersion(nodeModules: string, pkg: string): string | null {
  try {
    return JSON.parse(readFileSync(join(nodeModules, pkg, "package.json"), "utf8")).version ?? null;
  } catch {
    return null;
  }
}

/** What a replica's launch hears while a GPU build is got. */
export interface GpuBuildHooks {
  /** Called once before a download starts (the replica reports `downloading`). */
  onDownloading(what: string): void;
  onProgress(p: TransferProgress): void;
  /** A line for the replica's log; `warning` lines say the runtime stays on the CPU. */
  note(line: string, warning?: boolean): void;
  signal: AbortSignal;
}

/** Settings of LlamaGpuBuilds; `fetch`, platform and arch are injectable for tests. */
export interface LlamaGpuOptions {
  dataDir: string;
  registry: string;
  /** The machine's GPUs as last probed. */
  gpus(): GpuInfo[];
  fetch?: typeof fetch;
  platform?: string;
  arch?: string;
}

/** Removes `.download-<pid>-*` dirs of processes that died while downloading (EPERM: another user's, running). */
function removeLeftovers(dir: string): void {
  for (const name of readdirSync(dir)) {
    const pid = Number(/^\.download-(\d+)-/.exec(name)?.[1]);
    if (!pid || pid === process.pid) continue;
    try {
      process.kill(pid, 0);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EPERM") rmSync(join(dir, name), { recursive: true, force: true });
    }
  }
}

/** Written into an unpacked package once complete (holds its integrity); its absence means damaged. */
const MARKER = ".inferd-integrity";

/**
 * Gets the GPU build a built-in llama.cpp replica needs, once per data dir and version (replicas
 * starting together share one download), and tells the runner which build to load.
 */
export class LlamaGpuBuilds {
  private inflight = new Map<string, Promise<string>>();

  constructor(private readonly opts: LlamaGpuOptions) {}

  /**
   * The runner env for a replica on GPUs `assigned` launched with `launchEnv`: which GPU build to
   * load and where, or why it runs on the CPU. Never throws: a failure is a warning and the CPU.
   */
  async prepare(
    assigned: number[],
    launchEnv: Record<string, string>,
    hooks: GpuBuildHooks,
  ): Promise<Record<string, string>> {
    if (assigned.length === 0) return {};
    const gpus = this.opts.gpus().filter((g) => assigned.includes(g.index));
    const choice = gpuBuildFor(gpus, this.opts.platform, this.opts.arch);
    if (!choice) return {};
    const cpu = (why: string, detail?: string) => {
      hooks.note(
        `[inferd] warning: ${why}${detail ? ` (${detail})` : ""}; the built-in llama.cpp runtime runs on the CPU`,
        true,
      );
      return { [GPU_UNAVAILABLE_ENV]: why };
    };
    if ("unavailable" in choice) return cpu(choice.unavailable);
    const name = GPU_NAMES[choice.gpu];
    if (!choice.pkg) {
      hooks.note(`[inferd] llama.cpp ${name} build: built into this runtime`);
      return { [GPU_ENV]: choice.gpu };
    }
    const nodeModules = runnerNodeModules(launchEnv);
    const version = nodeModules && installedVersion(nodeModules, "node-llama-cpp");
    if (!nodeModules || !version)
      return cpu(`node-llama-cpp was not found, so its ${name} build cannot be matched to it`);
    if (installedVersion(nodeModules, choice.pkg) === version) {
      hooks.note(`[inferd] llama.cpp ${name} build: ${choice.pkg} ${version}, installed with node-llama-cpp`);
      return { [GPU_ENV]: choice.gpu };
    }
    try {
      const dir = await this.ensure(
        choice.pkg,
        version,
        `the llama.cpp ${name} build (${choice.pkg} ${version})`,
        hooks,
      );
      return { [GPU_ENV]: choice.gpu, NODE_PATH: dir };
    } catch (e) {
      if (hooks.signal.aborted) throw e;
      return cpu(
        `the ${name} build could not be fetched: ${(e as Error).message}`,
        `${choice.pkg} ${version}${(e as Error).cause ? `: ${(e as Error).cause}` : ""}`,
      );
    }
  }

  /** Where `pkg@version` is kept: the node_modules dir to put on NODE_PATH. */
  cacheDir(version: string): string {
    return join(this.opts.dataDir, "runtimes", "llama-gpu", version, "node_modules");
  }

  /** The node_modules dir holding `pkg@version`, fetched and unpacked first unless already there. */
  private ensure(pkg: string, version: string, what: string, hooks: GpuBuildHooks): Promise<string> {
    const dir = this.cacheDir(version);
    if (existsSync(join(dir, pkg, MARKER))) {
      hooks.note(`[inferd] ${what}: already in ${join(dir, pkg)}`);
      return Promise.resolve(dir);
    }
    const key = `${pkg}@${version}`;
    let p = this.inflight.get(key);
    if (!p) {
      p = this.fetchInto(dir, pkg, version, what, hooks).finally(() => this.inflight.delete(key));
      this.inflight.set(key, p);
    }
    return p;
  }

  /** Reads the registry's metadata, downloads and checks the tarball, unpacks it into `dir/pkg`. */
  private async fetchInto(
    dir: string,
    pkg: string,
    version: string,
    what: string,
    hooks: GpuBuildHooks,
  ): Promise<string> {
    const dist = await this.distOf(pkg, version, hooks.signal);
    hooks.onDownloading(what);
    hooks.note(`[inferd] downloading ${what} from ${dist.tarball}`);
    mkdirSync(dir, { recursive: true });
    removeLeftovers(dir);
    const work = mkdtempSync(join(dir, `.download-${process.pid}-`));
    try {
      const tarball = await this.download(dist.tarball, hooks);
      const got = `sha512-${new Bun.CryptoHasher("sha512").update(tarball).digest("base64")}`;
      if (got !== dist.integrity)
        throw new Error("its sha512 does not match the registry's, so it was not used", {
          cause: `expected ${dist.integrity}, got ${got}`,
        });
      await new Bun.Archive(tarball).extract(work);
      const unpacked = join(work, "package");
      const manifest = installedVersion(work, "package");
      if (manifest !== version)
        throw new Error(`the tarball holds version ${manifest ?? "(no package.json)"}, not ${version}`);
      writeFileSync(join(unpacked, MARKER), dist.integrity);
      const target = join(dir, pkg);
      mkdirSync(dirname(target), { recursive: true });
      rmSync(target, { recursive: true, force: true }); // an earlier copy without its marker
      renameSync(unpacked, target);
      hooks.note(`[inferd] ${what}: checked (sha512) and unpacked into ${target}`);
      return dir;
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  }

  /** The version's `dist` from the registry's package metadata (the abbreviated form npm installs use). */
  private async distOf(
    pkg: string,
    version: string,
    signal: AbortSignal,
  ): Promise<{ tarball: string; integrity: string }> {
    const url = `${this.opts.registry}/${pkg.replace("/", "%2f")}`;
    let res: Response;
    try {
      res = await (this.opts.fetch ?? fetch)(url, {
        headers: { accept: "application/vnd.npm.install-v1+json; q=1.0, application/json; q=0.8" },
        signal: AbortSignal.any([signal, AbortSignal.timeout(30_000)]),
      });
    } catch (e) {
      throw new Error(`cannot reach the npm registry at ${this.opts.registry}`, {
        cause: `${(e as Error).message}; npm_config_registry names another registry`,
      });
    }
    if (!res.ok) throw new Error(`the npm registry at ${this.opts.registry} answered ${res.status} for ${pkg}`);
    const meta = (await res.json().catch(() => null)) as {
      versions?: Record<string, { dist?: { tarball?: string; integrity?: string } }>;
    } | null;
    const dist = meta?.versions?.[version]?.dist;
    if (!dist?.tarball) throw new Error(`the npm registry at ${this.opts.registry} has no ${pkg} ${version}`);
    const integrity = dist.integrity?.split(/\s+/).find((i) => i.startsWith("sha512-"));
    if (!integrity) throw new Error(`the npm registry gives no sha512 checksum for ${pkg} ${version}`);
    return { tarball: dist.tarball, integrity };
  }

  /** The tarball's bytes, with progress as they come. */
  private async download(url: string, hooks: GpuBuildHooks): Promise<Uint8Array> {
    let res: Response;
    try {
      res = await (this.opts.fetch ?? fetch)(url, { signal: hooks.signal });
    } catch (e) {
      throw new Error(`cannot download ${url}`, { cause: (e as Error).message });
    }
    if (!res.ok || !res.body) throw new Error(`the download of ${url} answered ${res.status}`);
    const total = Number(res.headers.get("content-length") ?? -1);
    const progress = new Progress(total);
    const file = url.slice(url.lastIndexOf("/") + 1);
    const chunks: Uint8Array[] = [];
    let done = 0;
    try {
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        chunks.push(chunk);
        done += chunk.length;
        progress.set(done);
        hooks.onProgress({ ...progress.snapshot(), file });
      }
    } catch (e) {
      throw new Error(`the download of ${url} broke off after ${done} bytes`, { cause: (e as Error).message });
    }
    if (total >= 0 && done !== total) throw new Error(`the download of ${url} ended after ${done} of ${total} bytes`);
    return Buffer.concat(chunks);
  }
}
