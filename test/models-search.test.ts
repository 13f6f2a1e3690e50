/**
 * Finding a model by name, against a real inferd whose Hugging Face endpoint is the fake hub
 * (test/fixtures/hf-hub.ts, answering `/api/models?search=` as huggingface.co) and whose Ollama
 * library is the fake search page (test/fixtures/ollama/library.ts), on one small fake GPU: hits
 * with their quantisations, sizes (split files summed) and fit; `owner/repo` pulled without `hf:`
 * through the API and the CLI; a one-quant GGUF repo pulled without a quant; a missing repo told
 * apart from a gated one; failed and cancelled pulls dismissed with their partial files; failed pulls
 * never in the list the model picker reads.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { startFakeHub, type FakeHub } from "./fixtures/hf-hub";
import { ggufRepo, ggufRepoFiles, safetensorsRepo } from "./fixtures/hf-repos";
import { startFakeLibrary, type FakeLibrary } from "./fixtures/ollama/library";
import { cleanup, runInferd, tempDir, waitFor } from "./helpers/proc";
import { startServing, type Serving } from "./helpers/serving";
import { blobPath } from "../agent/models/store";
import type { SearchAnswer, SearchHit } from "../src/models/search";

const TINY = "inferd-test/Tiny-GGUF";
const SINGLE = "inferd-test/Single-GGUF";
const GATED = "inferd-test/Gated-GGUF";
const TINY_ST = "inferd-test/tiny-llama";
const MiB = 1 << 20;
/** One small GPU, all of it free: the tiny quants fit on it, the 300 MiB one and the overhead do not. */
const GPUS = JSON.stringify([{ name: "NVIDIA T400", memory_total: 768, memory_used: 0 }]);
let hub: FakeHub;
let lib: FakeLibrary;
let srv: Serving;

const json = async (r: Response | Promise<Response>) => (await r).json();
const search = (q: string, backend = "llamacpp") =>
  json(srv.admin(`/admin/models/search?q=${encodeURIComponent(q)}&backend=${backend}`)) as Promise<SearchAnswer>;
const waitModel = (id: string, state: string) =>
  waitFor(
    async () => {
      const m = await json(srv.admin(`/admin/models/${id}`));
      return m.state === state ? m : undefined;
    },
    { what: `model ${id} ${state}`, timeoutMs: 30_000, detail: () => srv.output() },
  );

beforeAll(async () => {
  const src = tempDir("hub-src");
  const big = {
    "Tiny-Q6_K-00001-of-00003.gguf": 2 * MiB,
    "Tiny-Q6_K-00002-of-00003.gguf": 2 * MiB,
    "Tiny-Q6_K-00003-of-00003.gguf": 2 * MiB,
    "Tiny-F16.gguf": 300 * MiB,
  };
  [hub, lib] = await Promise.all([
    startFakeHub({
      repos: {
        [TINY]: {
          ...ggufRepo(join(src, "tiny"), {
            name: "Tiny",
            files: [...ggufRepoFiles("Tiny"), "Tiny-F16.gguf"],
            sizes: big,
          }),
          downloads: 900,
          likes: 12,
        },
        [SINGLE]: {
          ...ggufRepo(join(src, "single"), { name: "Single", files: ["Single-Q8_0.gguf", "mmproj-Single-F16.gguf"] }),
          downloads: 300,
        },
        [GATED]: {
          ...ggufRepo(join(src, "gated"), { name: "Gated", files: ["Gated-Q4_K_M.gguf"] }),
          gated: "files",
          downloads: 50,
        },
        [TINY_ST]: { ...safetensorsRepo(join(src, "st")), downloads: 700 },
      },
    }),
    startFakeLibrary(),
  ]);
  srv = await startServing({
    HF_ENDPOINT: hub.url,
    HF_HUB_OFFLINE: undefined as unknown as string,
    OLLAMA_LIBRARY_URL: lib.url,
    FAKE_GPUS: GPUS,
  });
  await waitFor(
    async () =>
      ((await json(srv.admin("/admin/workers"))) as { gpus: unknown[] }[]).some((w) => w.gpus.length) || undefined,
    { what: "the local worker's GPUs" },
  );
}, 120_000);
afterAll(async () => {
  await srv?.stop().catch(() => 0);
  await Promise.all([hub?.stop(), lib?.stop()]);
  await cleanup();
});

describe("searching by name", () => {
  test("GGUF repos, most downloaded first, each quant with its size (split parts summed) and its fit on this GPU", async () => {
    const found = await search("gguf");
    expect(found).toMatchObject({ query: "gguf", backend: "llamacpp", from: "huggingface" });
    expect(found.hits.map((h) => h.id)).toEqual([TINY, SINGLE, GATED]); // the safetensors repo is not a GGUF one
    const tiny = found.hits[0];
    expect(tiny).toMatchObject({ downloads: 900, likes: 12, gated: false, url: `${hub.url}/${TINY}`, note: null });
    const size = (...paths: string[]) => paths.reduce((s, p) => s + hub.file(TINY, p).size, 0);
    // Smallest first; the projector is no quantisation but comes with each one (as llama.cpp's -hf
    // fetches it); the three Q6_K parts are one.
    const projector = size("mmproj-Tiny-F16.gguf");
    expect(tiny.offers.map((o) => [o.label, o.source, o.files, o.size_bytes, o.projector_bytes])).toEqual([
      ["Q4_K_M", `hf:${TINY}:Q4_K_M`, 2, size("Tiny-Q4_K_M.gguf") + projector, projector],
      ["Q8_0", `hf:${TINY}:Q8_0`, 2, size("Tiny-Q8_0.gguf") + projector, projector],
      [
        "Q6_K",
        `hf:${TINY}:Q6_K`,
        4,
        size("Tiny-Q6_K-00001-of-00003.gguf", "Tiny-Q6_K-00002-of-00003.gguf", "Tiny-Q6_K-00003-of-00003.gguf") +
          projector,
        projector,
      ],
      ["F16", `hf:${TINY}:F16`, 2, 300 * MiB + projector, projector],
    ]);
    expect(tiny.offers[0].fit).toMatchObject({ verdict: "gpu", needs_mib: 513 });
    expect(tiny.offers[0].fit.where).toMatch(/^GPU 0 \(NVIDIA T400\) on .+: 0\.8 GiB free$/);
    // 300 MiB of weights (and the projector), 5 % and 512 MiB of overhead do not fit on 768 MiB: this machine's RAM it is.
    expect(tiny.offers[3].fit).toMatchObject({
      verdict: "ram",
      needs_mib: Math.ceil(((300 * MiB + projector) * 1.05) / MiB + 512),
    });
    expect(tiny.offers[3].fit.where).toMatch(/^RAM of .+: [\d.]+ GiB free$/);
    const gated = found.hits.find((h) => h.id === GATED) as SearchHit;
    expect(gated.gated).toBe("manual");
    expect(gated.offers.map((o) => o.label)).toEqual(["Q4_K_M"]);
    expect((await search("no-such-model-anywhere")).hits).toEqual([]);
  });

  test("for vLLM: safetensors repos with the snapshot a runtime reads; for Ollama: the library's sizes", async () => {
    const st = await search("tiny", "vllm");
    expect(st.hits.map((h) => h.id)).toEqual([TINY_ST]);
    const shards = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"].reduce(
      (s, p) => s + hub.file(TINY_ST, p).size,
      0,
    );
    expect(st.hits[0].offers).toEqual([
      expect.objectContaining({ label: "snapshot", source: `hf:${TINY_ST}`, files: 7, size_bytes: shards }),
    ]);
    const ol = await search("qwen", "ollama");
    expect(ol).toMatchObject({ from: "ollama" });
    expect(ol.hits.map((h) => h.id)).toEqual(["qwen2.5", "qwen2.5-coder"]);
    expect(ol.hits[0].url).toBe(`${lib.url}/library/qwen2.5`);
    expect(ol.hits[0].offers.map((o) => o.source)).toEqual(
      ["0.5b", "1.5b", "3b", "7b", "14b", "32b", "72b"].map((s) => `qwen2.5:${s}`),
    );
    // Sizes reckoned as Ollama's default Q4_K_M: 0.5b is ~303 MB, more than this small GPU takes with the overhead.
    expect(ol.hits[0].offers[0]).toMatchObject({
      estimated: true,
      size_bytes: Math.round((0.5e9 * 4.85) / 8),
      fit: { verdict: "ram" },
    });
    expect(ol.hits[0].offers.at(-1)!.fit).toMatchObject({
      verdict: expect.stringMatching(/^(ram|too_big)$/),
      needs_mib: Math.ceil((((72e9 * 4.85) / 8) * 1.05) / MiB + 512),
    }); // 72b: ~44 GB
    expect(lib.queries).toContain("qwen");
  });

  test("bad searches are a 400 naming the field; an unreachable hub is a 502 saying which", async () => {
    for (const [path, field] of [
      ["?q=", "q"],
      [`?q=${"x".repeat(201)}`, "q"],
      ["?q=qwen&backend=tgi", "backend"],
    ]) {
      const r = await srv.admin(`/admin/models/search${path}`);
      expect(r.status).toBe(400);
      expect((await r.json()).error.field).toBe(field);
    }
    const off = await startServing({
      HF_ENDPOINT: "http://127.0.0.1:9",
      HF_HUB_OFFLINE: undefined as unknown as string,
      OLLAMA_LIBRARY_URL: "http://127.0.0.1:9",
    });
    try {
      for (const backend of ["llamacpp", "ollama"]) {
        const r = await off.admin(`/admin/models/search?q=qwen&backend=${backend}`);
        expect(r.status).toBe(502);
        expect((await r.json()).error.message).toContain("http://127.0.0.1:9");
      }
    } finally {
      await off.stop();
    }
  }, 60_000);
});

describe("pulling by name", () => {
  test("owner/repo:QUANT without hf: pulls through the API, stored as the hub source it is", async () => {
    const r = await srv.admin("/admin/models", { body: { source: `${TINY}:Q8_0` } });
    expect([200, 202]).toContain(r.status);
    const m = await waitModel((await r.json()).id, "ready");
    expect(m).toMatchObject({ source: `hf:${TINY}:Q8_0`, kind: "hf-quant", repo: TINY });
    expect(m.entry).toEndWith("/Tiny-Q8_0.gguf");
    // Written either way, it is the same model.
    expect((await json(srv.admin("/admin/models", { body: { source: `hf:${TINY}:q8_0` } }))).id).toBe(m.id);
  });

  test("a GGUF repo with one quantisation needs none; with several, the answer names them", async () => {
    const m = await waitModel((await json(srv.admin("/admin/models", { body: { source: SINGLE } }))).id, "ready");
    expect(m).toMatchObject({ source: `hf:${SINGLE}`, kind: "hf-repo" });
    expect(m.files.map((f: { path: string }) => f.path)).toEqual(["Single-Q8_0.gguf"]);
    expect(m.info).toMatchObject({ format: "gguf" });
    const r = await srv.admin("/admin/models", { body: { source: TINY } });
    expect(r.status).toBe(400);
    const err = (await r.json()).error;
    expect(err.field).toBe("source");
    expect(err.message).toContain(`name one quant, e.g. hf:${TINY}:Q4_K_M (quants there: F16, Q4_K_M, Q6_K, Q8_0)`);
  });

  test("the CLI pulls owner/repo without hf: and shows it by that name", async () => {
    const pulled = await runInferd({ args: ["model", "pull", `${TINY}:Q4_K_M`, "--data-dir", srv.dataDir] });
    expect(pulled.code).toBe(0);
    expect(pulled.stdout).toContain(`hf:${TINY}:Q4_K_M is ready`);
    const shown = await runInferd({ args: ["model", "show", `${TINY}:Q4_K_M`, "--json", "--data-dir", srv.dataDir] });
    expect(JSON.parse(shown.stdout)).toMatchObject({ source: `hf:${TINY}:Q4_K_M`, state: "ready" });
    const missing = await runInferd({
      args: ["model", "pull", "inferd-test/No-Such-GGUF:Q4_K_M", "--data-dir", srv.dataDir],
    });
    expect(missing.code).not.toBe(0);
    expect(missing.output).toContain("Hugging Face repo inferd-test/No-Such-GGUF not found");
  });

  test("a repo that does not exist is not found (no model row); a gated one fails saying it is gated", async () => {
    const before = (await json(srv.admin("/admin/models"))).length;
    for (const source of ["inferd-test/No-Such-GGUF", "hf:inferd-test/No-Such-GGUF:Q4_K_M", `${TINY}:IQ1_S`]) {
      const r = await srv.admin("/admin/models", { body: { source } });
      expect(r.status).toBe(404);
      const err = (await r.json()).error;
      expect(err).toMatchObject({ code: "not_found", field: "source" });
      expect(err.message).toMatch(/not found|has no GGUF model for quant IQ1_S/);
      expect(err.message).not.toContain("gated");
    }
    expect((await json(srv.admin("/admin/models"))).length).toBe(before);
    // The hub lists a gated repo's files to anyone; the download needs a token that accepted its terms.
    const gated = await json(srv.admin("/admin/models", { body: { source: `${GATED}:Q4_K_M` } }));
    const failed = await waitModel(gated.id, "failed");
    expect(failed.reason).toStartWith(`Hugging Face repo ${GATED} is gated or private: set HF_TOKEN`);
    expect(failed.reason).not.toContain("not found");
  });
});

describe("failed pulls", () => {
  test("are never in the list the model picker reads, and are dismissed with their partial files", async () => {
    const models = (await json(srv.admin("/admin/models"))) as { id: string; source: string; state: string }[];
    const failed = models.find((m) => m.state === "failed")!;
    expect(failed.source).toBe(`hf:${GATED}:Q4_K_M`);
    const usable = (await json(srv.admin("/admin/models?state=ready,downloading"))) as { state: string }[];
    expect(usable.length).toBeGreaterThan(0);
    expect(usable.every((m) => m.state === "ready" || m.state === "downloading")).toBe(true);
    expect((await json(srv.admin("/admin/models?state=broken"))).error.field).toBe("state");
    // A download stopped half-way leaves its part; dismissing the pull removes it.
    hub.throttle(256 * 1024);
    const q6 = await json(srv.admin("/admin/models", { body: { source: `${TINY}:Q6_K` } }));
    const part = `${blobPath(join(srv.dataDir, "models"), TINY, hub.file(TINY, "Tiny-Q6_K-00001-of-00003.gguf").sha256)}.part`;
    await waitFor(() => existsSync(part) || undefined, { what: "a part on disk" });
    expect((await srv.admin(`/admin/models/${q6.id}/cancel`, { method: "POST" })).status).toBe(200);
    hub.throttle(null);
    expect(existsSync(part)).toBe(true);
    for (const id of [q6.id, failed.id]) {
      const r = await srv.admin(`/admin/models/${id}/dismiss`, { method: "POST" });
      expect(r.status).toBe(200);
      expect((await srv.admin(`/admin/models/${id}`)).status).toBe(404);
    }
    expect(existsSync(part)).toBe(false);
    // A ready model is not dismissed (Delete removes it).
    const ready = models.find((m) => m.state === "ready")!;
    const r = await srv.admin(`/admin/models/${ready.id}/dismiss`, { method: "POST" });
    expect(r.status).toBe(409);
    expect((await r.json()).error.code).toBe("not_dismissable");
  });
});
