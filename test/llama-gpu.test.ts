/**
 * The built-in llama.cpp runtime on a GPU machine (agent/runtimes/llama-gpu.ts): which GPU build a
 * machine calls for; the compiled binary, on the fake 2× RTX 4090, fetching the CUDA build from a
 * fake npm registry into its data dir on a replica's first launch (progress, sha512 checked, offline
 * and tampered downloads falling back to the CPU with a warning, reused on the next launch); and the
 * runner saying which backend really runs. No GPU here: the fake package's native binary cannot
 * load, and neither can the real CUDA build installed in node_modules, so every launch ends on the
 * CPU saying why; that a CUDA build that loads is reported as "CUDA" is not checked here.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { buildTarget, TARGETS } from "../build/build";
import { gpuBuildFor, npmRegistry } from "../agent/runtimes/llama-gpu";
import { FIXTURE_BIN } from "./fixtures";
import { writeTinyGguf } from "./fixtures/gguf";
import { startFakeNpmRegistry, type FakeNpmRegistry } from "./fixtures/npm-registry";
import { cleanup, repoRoot, startInferd, tempDir, waitFor, type Inferd } from "./helpers/proc";
import { launchBrowser, openPage, signIn, textMatching, type UiPage } from "./helpers/browser";
import type { Browser } from "playwright-core";

const NLC_VERSION = JSON.parse(readFileSync(join(repoRoot, "node_modules/node-llama-cpp/package.json"), "utf8"))
  .version as string;
const CUDA = "@node-llama-cpp/linux-x64-cuda";
/** Model loads on a slow shared machine: a long deadline, polled, so fast machines finish fast. */
const LOAD_TIMEOUT = 90_000;

afterAll(cleanup);

describe("which GPU build a machine calls for", () => {
  test("NVIDIA → the CUDA package, other GPUs → Vulkan, Apple silicon → the packed Metal build, none where node-llama-cpp has none", () => {
    expect(gpuBuildFor([{ vendor: "nvidia" }], "linux", "x64")).toEqual({ gpu: "cuda", pkg: CUDA });
    expect(gpuBuildFor([{ vendor: "nvidia" }], "win32", "x64")).toEqual({
      gpu: "cuda",
      pkg: "@node-llama-cpp/win-x64-cuda",
    });
    expect(gpuBuildFor([{ vendor: "amd" }], "linux", "x64")).toEqual({
      gpu: "vulkan",
      pkg: "@node-llama-cpp/linux-x64-vulkan",
    });
    expect(gpuBuildFor([], "darwin", "arm64")).toEqual({ gpu: "metal", pkg: null });
    expect(gpuBuildFor([{ vendor: "nvidia" }], "linux", "arm64")).toEqual({
      unavailable: "node-llama-cpp has no CUDA build for linux-arm64",
    });
    expect(gpuBuildFor([], "linux", "x64")).toBeNull();
  });

  test("the registry is npm's own setting, else registry.npmjs.org", () => {
    expect(npmRegistry({})).toBe("https://registry.npmjs.org");
    expect(npmRegistry({ npm_config_registry: "https://npm.example.com/" })).toBe("https://npm.example.com");
    expect(npmRegistry({ NPM_CONFIG_REGISTRY: "http://127.0.0.1:4873" })).toBe("http://127.0.0.1:4873");
  });
});

/** An assignment as the admin API shows it. */
type Assignment = {
  id: string;
  state: string;
  reason?: string;
  backend?: string;
  gpu_indices: number[];
  progress?: { bytes_done: number; bytes_total: number; file?: string };
};

describe("the compiled binary on a machine with 2× RTX 4090 (fake nvidia-smi, fake npm registry)", () => {
  let bin: string;
  let registry: FakeNpmRegistry;
  let server: Inferd;
  let dataDir: string;
  let env: Record<string, string>;
  let model: string;
  let workload = "";
  let browser: Browser;
  let ui: UiPage;
  const cached = () => join(dataDir, "runtimes", "llama-gpu", NLC_VERSION, "node_modules", CUDA);
  const tarballRequests = () => registry.requests.filter((p) => p.endsWith(".tgz")).length;

  const admin = (path: string, init: { method?: string; body?: unknown } = {}) =>
    fetch(`${server.url}${path}`, {
      method: init.method ?? (init.body === undefined ? "GET" : "POST"),
      headers: { authorization: `Bearer ${server.adminToken}`, "content-type": "application/json" },
      body: init.body === undefined ? undefined : JSON.stringify(init.body),
    });
  const assignment = async (id = workload) =>
    ((await (await admin(`/admin/workloads/${id}`)).json()) as { assignments: Assignment[] }).assignments[0] as
      | Assignment
      | undefined;
  const logs = async (id = workload) =>
    ((await (await admin(`/admin/workloads/${id}/logs`)).json()) as { replicas: { text: string }[] }).replicas
      .map((r) => r.text)
      .join("")
      .replace(/\x1b\[[\d;]*m/g, "");
  /** Waits for the workload's replica to be ready (failing at once if it fails). */
  const ready = (id = workload) =>
    waitFor(
      async () => {
        const a = await assignment(id);
        if (a?.state === "failed")
          throw new Error(`the replica failed: ${a.reason}\n--- output ---\n${server.output()}`);
        return a?.state === "ready" ? a : undefined;
      },
      { what: "the built-in llama.cpp replica ready", timeoutMs: LOAD_TIMEOUT, intervalMs: 100, detail: server.output },
    );
  /** Replaces the workload with a new one on one GPU: a replica's first launch. */
  const launch = async (name: string) => {
    if (workload) expect((await admin(`/admin/workloads/${workload}`, { method: "DELETE" })).status).toBe(204);
    const r = await admin("/admin/projects/gpu/workloads", {
      body: {
        name,
        backend: "llamacpp",
        model_name: name,
        config: { command: `llama-server -m ${model} -t 1 -c 256` },
      },
    });
    expect(r.status).toBe(201);
    workload = ((await r.json()) as { id: string }).id;
  };

  beforeAll(async () => {
    const built = await buildTarget("linux-x64", { outDir: tempDir("dist") });
    if ("unavailable" in built.llama)
      throw new Error(`linux-x64 was built without the built-in runtime: ${built.llama.unavailable}`);
    bin = join(tempDir("app"), TARGETS["linux-x64"].file);
    copyFileSync(built.path, bin);
    registry = await startFakeNpmRegistry([{ name: CUDA, version: NLC_VERSION }]);
    // nvidia-smi reports the GPUs; no llama-server on PATH, so the built-in runtime serves.
    const path = tempDir("path");
    symlinkSync(join(FIXTURE_BIN, "nvidia-smi"), join(path, "nvidia-smi"));
    const PATH = `${path}:/usr/bin:/bin`;
    expect(Bun.which("llama-server", { PATH })).toBeNull();
    model = join(tempDir("gguf"), "tiny.gguf");
    writeTinyGguf(model);
    dataDir = join(tempDir("data"), "store");
    mkdirSync(dataDir, { recursive: true });
    env = {
      INFERD_LOCAL_AGENT: "1",
      INFERD_TELEMETRY_INTERVAL_MS: "300",
      PATH,
      FAKE_GPUS: "2x NVIDIA GeForce RTX 4090:24564",
      npm_config_registry: registry.url,
    };
    server = await startInferd({ bin: [bin], dataDir, env });
    expect((await admin("/admin/projects", { body: { name: "GPU", slug: "gpu" } })).status).toBe(201);
  });

  afterAll(async () => {
    await browser?.close();
    await server?.stop().catch(() => {});
    await registry?.stop();
  });

  test("registry offline: the replica serves on the CPU, and its row and log say the CUDA build could not be fetched", async () => {
    await registry.offline();
    await launch("offline");
    const a = await ready();
    expect(a.gpu_indices).toHaveLength(1);
    expect(a.backend).toBe(
      `CPU (GPU build unavailable: the CUDA build could not be fetched: cannot reach the npm registry at ${registry.url})`,
    );
    const log = await logs();
    expect(log).toContain(
      `[inferd] warning: the CUDA build could not be fetched: cannot reach the npm registry at ${registry.url} (${CUDA} ${NLC_VERSION}: `,
    );
    expect(log).toContain("; the built-in llama.cpp runtime runs on the CPU");
    expect(log).toContain("llama.cpp backend: CPU (GPU build unavailable: the CUDA build could not be fetched");
    expect(existsSync(cached())).toBe(false);
    const live = await (await admin("/admin/projects/gpu/keys", { body: { name: "live", type: "live" } })).json();
    const chat = await fetch(`${server.url}/endpoint/gpu/offline/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${(live as { secret: string }).secret}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "offline", max_tokens: 4, messages: [{ role: "user", content: "hi" }] }),
    });
    expect(chat.status).toBe(200);
    await registry.online();
  });

  test("a tarball whose sha512 does not match the registry's is refused, and the replica serves on the CPU saying so", async () => {
    registry.tamper = true;
    await launch("tampered");
    const a = await ready();
    expect(a.backend).toBe(
      "CPU (GPU build unavailable: the CUDA build could not be fetched: its sha512 does not match the registry's, so it was not used)",
    );
    expect(tarballRequests()).toBe(1);
    const log = await logs();
    expect(log).toMatch(
      /\[inferd\] warning: the CUDA build could not be fetched: its sha512 does not match the registry's, so it was not used \(.*expected sha512-\S+, got sha512-\S+\); the built-in llama.cpp runtime runs on the CPU/,
    );
    expect(existsSync(cached())).toBe(false);
    expect(readdirSync(join(dataDir, "runtimes", "llama-gpu", NLC_VERSION, "node_modules"))).toEqual([]);
    registry.tamper = false;
  });

  test("first launch: downloads the CUDA build into the data dir with progress, checks it, and says why it does not load here", async () => {
    // What a process killed while downloading left behind is cleared.
    const dead = Bun.spawn(["true"]);
    await dead.exited;
    const leftover = join(
      dataDir,
      "runtimes",
      "llama-gpu",
      NLC_VERSION,
      "node_modules",
      `.download-${dead.pid}-abc123`,
    );
    mkdirSync(leftover);
    await Bun.write(join(leftover, "package.tgz"), "half a tarball");
    registry.hold();
    await launch("first");
    // Held at half: the report comes to say exactly the bytes received, even though no more arrive
    // (progress is reported at most twice a second, and the last one within that is held, not dropped).
    const half = Math.floor(registry.tarball(CUDA).length / 2);
    const downloading = await waitFor(
      async () => {
        const a = await assignment();
        return a?.state === "downloading" && a.progress?.bytes_done === half ? a : undefined;
      },
      {
        what: "the replica downloading the CUDA build, halfway",
        timeoutMs: LOAD_TIMEOUT,
        intervalMs: 50,
        detail: server.output,
      },
    );
    expect(downloading.reason).toBe(`downloading the llama.cpp CUDA build (${CUDA} ${NLC_VERSION})`);
    expect(downloading.progress).toMatchObject({
      bytes_total: registry.tarball(CUDA).length,
      file: `linux-x64-cuda-${NLC_VERSION}.tgz`,
    });
    // The workload page shows it as a model pull: the reason, a bar and the bytes.
    browser = await launchBrowser();
    ui = await openPage(browser, server.url);
    await signIn(ui, server.adminToken);
    await ui.visit(`/workloads/${workload}`);
    const status = ui.page.getByTestId("replica-status");
    await textMatching(
      status,
      /downloading the llama\.cpp CUDA build .*50%.*linux-x64-cuda-.*\.tgz/,
      "the replica's download",
    );
    await ui.page.getByRole("progressbar").first().waitFor();
    await ui.checkWidths("llama-gpu-download");
    registry.release();
    const a = await ready();
    // The row says the CPU runs, and why; it does not claim the GPU.
    const row = ui.page.locator("section[aria-labelledby=replicas] tbody tr");
    const where = await textMatching(
      row.locator("td").first(),
      /CPU \(GPU build unavailable: the CUDA build does not run on this machine\)/,
      "the replica row's backend",
    );
    expect(where).not.toContain("GPU 0");
    await ui.checkWidths("llama-gpu-cpu-fallback");
    expect(a.backend).toBe("CPU (GPU build unavailable: the CUDA build does not run on this machine)");
    expect(readFileSync(join(cached(), ".inferd-integrity"), "utf8")).toStartWith("sha512-");
    expect(readdirSync(join(dataDir, "runtimes", "llama-gpu", NLC_VERSION, "node_modules"))).toEqual([
      "@node-llama-cpp",
    ]);
    expect(readdirSync(join(cached(), "bins", "linux-x64-cuda")).sort()).toEqual([
      "_nlcBuildMetadata.json",
      "libggml-filler.so",
      "llama-addon.node",
    ]);
    const log = await logs();
    expect(log).toContain(
      `[inferd] downloading the llama.cpp CUDA build (${CUDA} ${NLC_VERSION}) from ${registry.url}/${CUDA}/-/linux-x64-cuda-${NLC_VERSION}.tgz`,
    );
    expect(log).toContain(`checked (sha512) and unpacked into ${cached()}`);
    expect(log).toContain(
      '[node-llama-cpp] The prebuilt binary for platform "linux" "x64" with CUDA support is not compatible with the current system',
    );
    expect(log).toContain("warning: the CUDA build does not run on this machine; falling back to the CPU build");
    expect(tarballRequests()).toBe(2);
  });

  test("the next launch, after a restart, uses the downloaded build without fetching it again", async () => {
    expect(await server.stop()).toBe(0);
    server = await startInferd({ bin: [bin], dataDir, env });
    const a = await ready();
    expect(a.backend).toBe("CPU (GPU build unavailable: the CUDA build does not run on this machine)");
    expect(tarballRequests()).toBe(2);
    expect(await logs()).toContain(
      `[inferd] the llama.cpp CUDA build (${CUDA} ${NLC_VERSION}): already in ${cached()}`,
    );
  });
});
