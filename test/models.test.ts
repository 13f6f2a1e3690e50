/**
 * Models through inferd, end to end against the fake Hugging Face hub pointed at by HF_ENDPOINT (as
 * a user points inferd at a mirror): pulls through the API and the CLI with progress, a workload
 * whose `-hf` model is pulled before the built-in llama.cpp runtime serves it to the OpenAI SDK,
 * kill -9 in the middle of a download, failures reported (not crashed), removal refused while used,
 * a model path checked before a workload names it, and placement judged by the model's memory
 * estimate against the GPUs' free memory.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, statSync, symlinkSync } from "node:fs";
import { dirname, join } from "node:path";
import OpenAI from "openai";
import { startFakeHub, type FakeHub } from "./fixtures/hf-hub";
import { ggufRepo, ggufRepoFiles } from "./fixtures/hf-repos";
import { FIXTURE_BIN } from "./fixtures";
import { writeTinyGguf } from "./fixtures/gguf";
import { cleanup, runInferd, startInferd, tempDir, waitFor, type Inferd } from "./helpers/proc";
import { sseEvents } from "./helpers/serving";
import { blobPath } from "../agent/models/store";
import { joinAgent, startHost } from "./helpers/agents";

const REPO = "inferd-test/Tiny-GGUF";
const GATED = "inferd-test/Gated-GGUF";
const BIG = 6 << 20;
let hub: FakeHub;
let srv: Inferd;

/** An inferd with its local agent, the fake hub as its Hugging Face endpoint, no llama-server on PATH. */
const serve = (dataDir?: string, env: Record<string, string> = {}) =>
  startInferd({
    dataDir,
    env: {
      INFERD_LOCAL_AGENT: "1",
      INFERD_TELEMETRY_INTERVAL_MS: "300",
      INFERD_LOG_LEVEL: "warn",
      HF_ENDPOINT: hub.url,
      ...env,
    },
  });
const api = (s: Inferd, path: string, init: { method?: string; body?: unknown } = {}) =>
  fetch(`${s.url}${path}`, {
    method: init.method ?? (init.body ? "POST" : "GET"),
    headers: { authorization: `Bearer ${s.adminToken}`, "content-type": "application/json" },
    body: init.body ? JSON.stringify(init.body) : undefined,
  });
const model = async (s: Inferd, id: string) => (await api(s, `/admin/models/${id}`)).json();
const waitModel = (s: Inferd, id: string, state: string, timeoutMs = 30_000) =>
  waitFor(
    async () => {
      const m = await model(s, id);
      return m.state === state ? m : undefined;
    },
    { what: `model ${id} ${state}`, timeoutMs, detail: () => s.output() },
  );

beforeAll(async () => {
  const src = tempDir("hub-src");
  hub = await startFakeHub({
    repos: {
      [REPO]: ggufRepo(join(src, "tiny"), {
        name: "Tiny",
        files: [...ggufRepoFiles("Tiny"), "Tiny-IQ4_XS.gguf", "Tiny-Q5_K_M.gguf"],
        sizes: {
          "Tiny-IQ4_XS.gguf": BIG,
          "Tiny-Q6_K-00001-of-00003.gguf": BIG,
          "Tiny-Q6_K-00002-of-00003.gguf": BIG,
          "Tiny-Q6_K-00003-of-00003.gguf": BIG,
        },
      }),
      [GATED]: { ...ggufRepo(join(src, "gated"), { name: "Gated", files: ["Gated-Q4_K_M.gguf"] }), gated: true },
    },
  });
  srv = await serve();
});
afterAll(async () => {
  await srv?.stop().catch(() => 0);
  await hub.stop();
  await cleanup();
});

describe("pulling through the API and the CLI", () => {
  test("by quant tag: 202 downloading, progress over SSE, then ready with the model's shape and estimate", async () => {
    const r = await api(srv, "/admin/models", { body: { source: `hf:${REPO}:Q4_K_M` } });
    expect([200, 202]).toContain(r.status);
    const created = await r.json();
    expect(created).toMatchObject({ source: `hf:${REPO}:Q4_K_M`, kind: "hf-quant", repo: REPO });
    const events = (await sseEvents(await api(srv, `/admin/models/${created.id}/progress`))) as { state: string }[];
    expect(events.at(-1)!.state).toBe("ready");
    const m = await waitModel(srv, created.id, "ready");
    const f = hub.file(REPO, "Tiny-Q4_K_M.gguf");
    expect(m.entry).toEndWith("/Tiny-Q4_K_M.gguf");
    expect(m.entry.startsWith(join(srv.dataDir, "models"))).toBe(true);
    // The quant and the repo's vision projector, as llama.cpp's `-hf` takes them.
    const p = hub.file(REPO, "mmproj-Tiny-F16.gguf");
    expect(m.files).toEqual([
      { path: "Tiny-Q4_K_M.gguf", size: f.size, sha256: f.sha256 },
      { path: "mmproj-Tiny-F16.gguf", size: p.size, sha256: p.sha256 },
    ]);
    expect(m.info).toMatchObject({
      format: "gguf",
      architecture: "llama",
      layers: 2,
      heads: 4,
      kv_heads: 2,
      context_length: 2048,
    });
    expect(m.estimate.total_bytes).toBe(m.estimate.weights_bytes + m.estimate.kv_bytes + m.estimate.overhead_bytes);
    // Asking again is the same model, not a second download.
    const again = await (await api(srv, "/admin/models", { body: { source: `hf:${REPO}:q4_k_m` } })).json();
    expect(again.id).toBe(created.id);
  });

  test("the CLI pulls through the running server with a progress line, and lists what the store holds", async () => {
    const pulled = await runInferd({ args: ["model", "pull", `hf:${REPO}/Tiny-Q8_0.gguf`, "--data-dir", srv.dataDir] });
    expect(pulled.code).toBe(0);
    expect(pulled.stdout).toContain(`hf:${REPO}/Tiny-Q8_0.gguf is ready`);
    expect(pulled.stderr).toMatch(/\[=+>?\s*\]\s+\d+%/);
    const listed = await runInferd({ args: ["model", "list", "--data-dir", srv.dataDir] });
    expect(listed.stdout).toContain(`hf:${REPO}:Q4_K_M`);
    expect(listed.stdout).toMatch(/ready\s+.*\(llama, F32, ctx 2048\)/);
  });

  test("concurrent pulls of one model are one download", async () => {
    hub.clearRequests();
    const spec = `hf:${REPO}/Tiny-Q6_K-00001-of-00003.gguf`;
    const [a, b] = await Promise.all(
      [1, 2].map(async () => (await api(srv, "/admin/models", { body: { source: spec } })).json()),
    );
    expect(a.id).toBe(b.id);
    const m = await waitModel(srv, a.id, "ready");
    expect(m.files.map((f: { path: string }) => f.path)).toHaveLength(3); // a split GGUF comes whole
    const gets = hub.requests().filter((r) => r.method === "GET" && r.path.includes("Tiny-Q6_K-00001"));
    expect(gets.length).toBe(1);
  });

  test("a gated repo fails with a message naming it; a failing disk is reported, and the server stays up", async () => {
    const gated = await (await api(srv, "/admin/models", { body: { source: `hf:${GATED}:Q4_K_M` } })).json();
    const failed = await waitModel(srv, gated.id, "failed");
    expect(failed.reason).toContain(GATED);
    expect(failed.reason).toContain("HF_TOKEN");
    // A disk that refuses writes: the file's part is a link to /dev/full (ENOSPC).
    // (A file no other test here pulls: the projector comes with every quant.)
    const f = hub.file(REPO, "Tiny-Q5_K_M.gguf");
    const part = `${blobPath(join(srv.dataDir, "models"), REPO, f.sha256!)}.part`;
    mkdirSync(dirname(part), { recursive: true });
    symlinkSync("/dev/full", part);
    const full = await (await api(srv, "/admin/models", { body: { source: `hf:${REPO}/Tiny-Q5_K_M.gguf` } })).json();
    expect((await waitModel(srv, full.id, "failed")).reason).toMatch(/no space left|ENOSPC/i);
    expect((await fetch(`${srv.url}/healthz`)).status).toBe(200);
  });

  test("a path is checked before a workload names it: file or folder, size, GGUF or not; a relative one is a 400", async () => {
    const dir = tempDir("check");
    const gguf = join(dir, "m.gguf");
    writeTinyGguf(gguf);
    const check = async (path: string) =>
      (await api(srv, `/admin/models/file?path=${encodeURIComponent(path)}`)).json();
    expect(await check(gguf)).toEqual({ path: gguf, kind: "file", size_bytes: statSync(gguf).size, gguf: true });
    expect(await check(join(dir, "missing.gguf"))).toMatchObject({ kind: null, gguf: false });
    expect(await check(dir)).toMatchObject({ kind: "folder", gguf: false });
    const r = await api(srv, "/admin/models/file?path=models/m.gguf");
    expect(r.status).toBe(400);
    expect((await r.json()).error.field).toBe("path");
  });

  test("bad sources are a 400 naming the field", async () => {
    for (const source of ["hf:not a repo", "ftp://x/y.gguf", "relative/path.gguf"]) {
      const r = await api(srv, "/admin/models", { body: { source } });
      expect(r.status).toBe(400);
      expect((await r.json()).error.field).toBe("source");
    }
  });
});

describe("a workload that names a hub model", () => {
  test("pulls it before launch (state downloading with progress), then the built-in runtime serves it to the OpenAI SDK", async () => {
    hub.throttle(256 * 1024);
    await api(srv, "/admin/projects", { body: { name: "M", slug: "m" } });
    const live = (await (await api(srv, "/admin/projects/m/keys", { body: { name: "k", type: "live" } })).json())
      .secret;
    const w = await (
      await api(srv, "/admin/projects/m/workloads", {
        body: {
          name: "tiny",
          backend: "llamacpp",
          model_name: "tiny",
          config: { command: `llama-server -hf ${REPO}:IQ4_XS -c 512` },
        },
      })
    ).json();
    const downloading = await waitFor(
      async () => {
        const d = await (await api(srv, `/admin/workloads/${w.id}`)).json();
        return d.assignments[0]?.state === "downloading" && d.assignments[0].progress ? d.assignments[0] : undefined;
      },
      { what: "the replica downloading with progress", timeoutMs: 20_000 },
    );
    expect(downloading.reason).toBe(`downloading hf:${REPO}:IQ4_XS`);
    const projector = hub.file(REPO, "mmproj-Tiny-F16.gguf").size;
    expect(downloading.progress.bytes_total).toBe(BIG + projector);
    hub.throttle(null);
    await waitFor(
      async () =>
        (await (await api(srv, `/admin/workloads/${w.id}`)).json()).assignments[0]?.state === "ready" || undefined,
      { what: "the replica ready", timeoutMs: 60_000, detail: () => srv.output() },
    );
    const openai = new OpenAI({ baseURL: `${srv.url}/endpoint/m/tiny/v1`, apiKey: live });
    const answer = await openai.chat.completions.create({
      model: "default",
      messages: [{ role: "user", content: "hello" }],
      max_tokens: 8,
    });
    expect(answer.choices[0].message.content!.length).toBeGreaterThan(0);
    const logs = await (await api(srv, `/admin/workloads/${w.id}/logs`)).text();
    expect(logs).toContain(`downloading hf:${REPO}:IQ4_XS`);

    const list = (await (await api(srv, "/admin/models")).json()) as {
      id: string;
      source: string;
      used_by: { slug: string }[];
    }[];
    const used = list.find((x) => x.source === `hf:${REPO}:IQ4_XS`)!;
    expect(used.used_by.map((u) => u.slug)).toEqual(["tiny"]);
    const refused = await api(srv, `/admin/models/${used.id}`, { method: "DELETE" });
    expect(refused.status).toBe(409);
    expect((await refused.json()).error).toMatchObject({
      code: "model_in_use",
      message: expect.stringContaining("m/tiny"),
    });
    await api(srv, `/admin/workloads/${w.id}`, { method: "DELETE" });
    const removed = await api(srv, `/admin/models/${used.id}`, { method: "DELETE" });
    expect(removed.status).toBe(200);
    expect(existsSync((await removed.json()).entry)).toBe(false);
  });
});

describe("a workload that names a hub repo without a tag", () => {
  test("`-hf owner/repo` counts as a use of the file its default tag pulled: removing that model, or its explicit pull, is refused while it runs", async () => {
    await api(srv, "/admin/projects", { body: { name: "D", slug: "d" } });
    // The same file as an explicit pull of the default tag (Q4_K_M), made before the workload.
    const explicit = await (await api(srv, "/admin/models", { body: { source: `hf:${REPO}:Q4_K_M` } })).json();
    await waitModel(srv, explicit.id, "ready");
    const w = await (
      await api(srv, "/admin/projects/d/workloads", {
        body: {
          name: "deftag",
          backend: "llamacpp",
          model_name: "t",
          config: { command: `llama-server -hf ${REPO} -c 512` },
        },
      })
    ).json();
    await waitFor(
      async () =>
        (await (await api(srv, `/admin/workloads/${w.id}`)).json()).assignments[0]?.state === "ready" || undefined,
      { what: "the replica ready", timeoutMs: 60_000, detail: () => srv.output() },
    );
    const list = (await (await api(srv, "/admin/models")).json()) as {
      id: string;
      source: string;
      entry: string;
      used_by: { slug: string }[];
    }[];
    const users = list.filter((m) => m.used_by.some((u) => u.slug === "deftag"));
    expect(users.map((m) => m.id)).toContain(explicit.id);
    for (const m of users) {
      const refused = await api(srv, `/admin/models/${m.id}`, { method: "DELETE" });
      expect(refused.status).toBe(409);
      expect((await refused.json()).error).toMatchObject({
        code: "model_in_use",
        message: expect.stringContaining("d/deftag"),
      });
      expect(existsSync(m.entry)).toBe(true);
    }
    await api(srv, `/admin/workloads/${w.id}`, { method: "DELETE" });
  });
});

test("kill -9 in the middle of a download: the restarted inferd resumes where it stopped", async () => {
  const dataDir = tempDir("resume");
  const first = await serve(dataDir);
  hub.throttle(2 << 20);
  hub.clearRequests();
  const m = await (await api(first, "/admin/models", { body: { source: `hf:${REPO}:Q6_K` } })).json();
  await waitFor(async () => ((await model(first, m.id)).progress?.bytes_done ?? 0) > BIG || undefined, {
    what: "some of the model on disk",
    timeoutMs: 30_000,
  });
  await first.kill9();
  const second = await serve(dataDir);
  try {
    expect(second.output()).toMatch(/resuming 1 model download$/m);
    hub.throttle(null);
    const done = await waitModel(second, m.id, "ready");
    expect(done.size_bytes).toBe(3 * BIG + hub.file(REPO, "mmproj-Tiny-F16.gguf").size);
    // The parts on disk were continued with Range requests, not fetched again from zero.
    const ranged = hub.requests().filter((r) => r.method === "GET" && /^bytes=[1-9]\d*-/.test(r.range ?? ""));
    expect(ranged.length).toBeGreaterThan(0);
  } finally {
    await second.stop();
  }
});

describe("fit and placement", () => {
  let fit: Inferd;
  beforeAll(async () => {
    const gpuPath = tempDir("smi");
    symlinkSync(join(FIXTURE_BIN, "nvidia-smi"), join(gpuPath, "nvidia-smi"));
    // One GPU of 700 MiB, none of it used (memory as the fake runtimes hold it: none run).
    fit = await serve(undefined, {
      PATH: `${gpuPath}:${process.env.PATH}`,
      FAKE_GPUS: "1x NVIDIA Tiny:700",
      FAKE_GPU_USAGE_DIR: tempDir("usage"),
    });
  });
  afterAll(() => fit?.stop());

  test("each worker's free GPU memory is shown against the model's estimate", async () => {
    const m = await (await api(fit, "/admin/models", { body: { source: `hf:${REPO}:Q4_K_M` } })).json();
    const ready = await waitModel(fit, m.id, "ready");
    const shown = await model(fit, ready.id);
    expect(shown.fit).toHaveLength(1);
    expect(shown.fit[0]).toMatchObject({
      needs_mib: Math.ceil(ready.estimate.total_bytes / 1048576),
      fits_on_gpu: true,
      gpus: [{ index: 0, total_mib: 700, free_mib: 700, fits: true }],
    });
  });

  test("a manual placement that does not fit is refused with the numbers, unless forced", async () => {
    await api(fit, "/admin/projects", { body: { name: "F", slug: "f" } });
    // A 2M-token context: the KV cache alone is about 0.5 GiB more than the small GPU holds with the weights.
    const w = await (
      await api(fit, "/admin/projects/f/workloads", {
        body: {
          name: "big-ctx",
          backend: "llamacpp",
          model_name: "t",
          config: { command: `llama-server -hf ${REPO}:Q4_K_M -c 2000000` },
        },
      })
    ).json();
    const [worker] = await (await api(fit, "/admin/workers")).json();
    const refused = await api(fit, `/admin/workloads/${w.id}/assignments`, { body: { worker_id: worker.id } });
    expect(refused.status).toBe(409);
    const { error } = await refused.json();
    expect(error.code).toBe("does_not_fit");
    expect(error.message).toMatch(
      /needs ~1\.\d GiB \(weights 0\.0 GiB \+ KV cache 0\.5 GiB for 2000000 tokens \+ overhead 0\.5 GiB\).*GPU 0 has 0\.7 GiB free/,
    );
    const forced = await api(fit, `/admin/workloads/${w.id}/assignments`, {
      body: { worker_id: worker.id, force: true },
    });
    expect(forced.status).toBe(201);
  });
});

test("a remote agent pulls a workload's model on its own machine, into its own store", async () => {
  const host = await startHost();
  const agent = await joinAgent(host, "puller", { HF_ENDPOINT: hub.url });
  try {
    await host.admin("/admin/projects", { name: "R", slug: "r" });
    const w = await (
      await host.admin("/admin/projects/r/workloads", {
        name: "remote-tiny",
        backend: "llamacpp",
        model_name: "t",
        worker_id: agent.workerId,
        config: { command: `llama-server -hf ${REPO}:Q8_0` },
      })
    ).json();
    const ready = await waitFor(
      async () => {
        const d = await (await host.admin(`/admin/workloads/${w.id}`)).json();
        return d.assignments[0]?.state === "ready" ? d.assignments[0] : undefined;
      },
      { what: "the remote replica ready", timeoutMs: 30_000, detail: agent.output },
    );
    expect(ready.worker_id).toBe(agent.workerId);
    expect(existsSync(join(agent.dataDir, "models", "hf", "hub", `models--${REPO.replace("/", "--")}`))).toBe(true);
    // The download is in the replica's log at the host (remote logs come up in batches).
    await waitFor(
      async () =>
        (await (await host.admin(`/admin/workloads/${w.id}/logs`)).text()).includes(`downloading hf:${REPO}:Q8_0`) ||
        undefined,
      { what: "the download in the remote replica's log" },
    );
  } finally {
    await agent.stop();
    await host.stop();
  }
});
