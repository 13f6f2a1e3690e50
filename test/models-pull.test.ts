/**
 * The model puller end to end against the fake Hugging Face hub (test/fixtures/hf-hub.ts) pointed
 * at by HF_ENDPOINT, as a user would: plans by file, by quant tag and as a snapshot; the store laid
 * out as Hugging Face's cache; URL and local sources; progress with an injected clock. The faults
 * (drops, kills, corruption, gated repos, a full disk, concurrency) are in models-faults.test.ts.
 */
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import { lstatSync, readFileSync, readlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { HubClient, HubError } from "../agent/models/hub";
import { isPulled, pullModel, type PullProgress } from "../agent/models/pull";
import { llamaHfArg, parseSource } from "../agent/models/source";
import { snapshotDir, urlDir } from "../agent/models/store";
import { startFakeHub, type FakeHub } from "./fixtures/hf-hub";
import { ggufRepo, safetensorsRepo } from "./fixtures/hf-repos";
import { cleanup, tempDir } from "./helpers/proc";

const GGUF = "inferd-test/Model-GGUF";
const NOQ4 = "inferd-test/X-GGUF";
const TINY = "inferd-test/tiny-llama";

let hub: FakeHub;
let prevEndpoint: string | undefined;
const sha256 = (path: string) => new Bun.CryptoHasher("sha256").update(readFileSync(path)).digest("hex");
/** A client as a user has one: the endpoint from HF_ENDPOINT, no token. */
const client = () => new HubClient({ token: "" });
const cdnGets = () => hub.requests().filter((r) => r.server === "cdn" && r.method === "GET");
const resolves = () => hub.requests().filter((r) => r.path.includes("/resolve/"));

beforeAll(async () => {
  const src = tempDir("hf-src");
  hub = await startFakeHub({
    repos: {
      [GGUF]: ggufRepo(join(src, "gguf")),
      [NOQ4]: ggufRepo(join(src, "x"), { name: "X", files: ["mmproj-X-Q4_K_M.gguf", "X-Q8_0.gguf"] }),
      [TINY]: safetensorsRepo(join(src, "st")),
    },
    separateCdn: true,
    treePageSize: 3,
  });
  prevEndpoint = process.env.HF_ENDPOINT;
  process.env.HF_ENDPOINT = hub.url;
});

afterEach(() => hub.clearRequests());

afterAll(async () => {
  if (prevEndpoint === undefined) delete process.env.HF_ENDPOINT;
  else process.env.HF_ENDPOINT = prevEndpoint;
  await hub.stop();
  await cleanup();
});

describe("plans", () => {
  test("by file: the file, with its LFS sha256, at the commit main points at", async () => {
    const plan = await client().plan(parseSource(`hf:${GGUF}/Model-Q8_0.gguf`));
    const f = hub.file(GGUF, "Model-Q8_0.gguf");
    expect(plan).toMatchObject({ repo: GGUF, revision: hub.commit(GGUF), entry: "Model-Q8_0.gguf", quant: "Q8_0" });
    expect(plan.files).toEqual([
      {
        path: f.path,
        size: f.size,
        sha256: f.sha256,
        oid: f.oid,
        url: `${hub.url}/${GGUF}/resolve/${hub.commit(GGUF)}/Model-Q8_0.gguf`,
      },
    ]);
    // The tree came in pages of 3 entries, following the Link header.
    expect(hub.requests().filter((r) => r.path.includes("/tree/")).length).toBeGreaterThanOrEqual(3);
  });

  test("by quant tag, case-insensitively; no tag is Q4_K_M as llama.cpp; an mmproj is the projector, never the model", async () => {
    expect((await client().plan(parseSource(`hf:${GGUF}:q4_k_m`))).entry).toBe("Model-Q4_K_M.gguf");
    expect((await client().plan(llamaHfArg(GGUF))).entry).toBe("Model-Q4_K_M.gguf");
    // Only the projector carries Q4_K_M here: the default falls through to Q8_0, as llama.cpp does.
    const noq4 = await client().plan(llamaHfArg(NOQ4));
    expect([noq4.entry, noq4.projector]).toEqual(["X-Q8_0.gguf", "mmproj-X-Q4_K_M.gguf"]);
    expect(noq4.files.map((f) => f.path)).toEqual(["X-Q8_0.gguf", "mmproj-X-Q4_K_M.gguf"]);
    const err = await client()
      .plan(parseSource(`hf:${NOQ4}:Q4_K_M`))
      .catch((e) => e);
    expect(err).toBeInstanceOf(HubError);
    expect(err.message).toBe(`Hugging Face repo ${NOQ4} has no GGUF model for quant Q4_K_M (quants there: Q8_0)`);
    expect(
      (
        await client()
          .plan(parseSource(`hf:${GGUF}:F16`))
          .catch((e) => e)
      ).message,
    ).toContain("quants there: Q4_K_M, Q6_K, Q8_0");
  });

  test("a split GGUF is fetched whole, whichever part is named (a quant with its projector, as llama.cpp's -hf)", async () => {
    const parts = [1, 2, 3].map((i) => `Model-Q6_K-0000${i}-of-00003.gguf`);
    const byQuant = await client().plan(parseSource(`hf:${GGUF}:Q6_K`));
    expect(byQuant.files.map((f) => f.path)).toEqual([...parts, "mmproj-Model-F16.gguf"]);
    expect(byQuant.entry).toBe(parts[0]);
    // A file named by path is that file alone (llama.cpp's `-hff`: no projector lookup).
    const byFile = await client().plan(parseSource(`hf:${GGUF}/Model-Q6_K-00002-of-00003.gguf`));
    expect(byFile.files.map((f) => f.path)).toEqual(parts);
    expect(byFile.entry).toBe(parts[0]);
    expect(byFile.projector).toBeUndefined();
    const modelsDir = tempDir("store");
    const m = await pullModel(await client().plan(parseSource(`hf:${GGUF}:Q6_K`)), { modelsDir, hub: client() });
    expect(m.entry).toBe(join(snapshotDir(modelsDir, GGUF, hub.commit(GGUF)), parts[0]));
    for (const p of parts) expect(sha256(join(m.dir, p))).toBe(hub.file(GGUF, p).sha256);
    expect(m.projector).toBe(join(m.dir, "mmproj-Model-F16.gguf"));
    expect(sha256(m.projector!)).toBe(hub.file(GGUF, "mmproj-Model-F16.gguf").sha256);
    expect(cdnGets().length).toBe(4);
  });

  test("revisions: a commit is used as is; an unknown one is a clear error", async () => {
    const commit = hub.commit(GGUF);
    expect((await client().plan(parseSource(`hf:${GGUF}@${commit}:Q8_0`))).revision).toBe(commit);
    const err = await client()
      .plan(parseSource(`hf:${GGUF}@nope:Q8_0`))
      .catch((e) => e);
    expect([err.status, err.message]).toEqual([404, `Hugging Face repo ${GGUF}: revision nope not found`]);
  });
});

describe("the store", () => {
  test("a safetensors snapshot, filtered, laid out as Hugging Face's cache", async () => {
    const modelsDir = tempDir("store");
    const plan = await client().plan(parseSource(`hf:${TINY}`));
    const kept = [
      "config.json",
      "generation_config.json",
      "model-00001-of-00002.safetensors",
      "model-00002-of-00002.safetensors",
      "model.safetensors.index.json",
      "tokenizer.json",
      "tokenizer_config.json",
    ];
    expect(plan.files.map((f) => f.path)).toEqual(kept);
    expect(isPulled(plan, modelsDir)).toBeNull();
    const m = await pullModel(plan, { modelsDir, hub: client() });
    const snap = snapshotDir(modelsDir, TINY, hub.commit(TINY));
    expect([m.dir, m.entry, m.revision]).toEqual([snap, snap, hub.commit(TINY)]);
    for (const path of kept) {
      const f = hub.file(TINY, path);
      expect(lstatSync(join(snap, path)).isSymbolicLink()).toBe(true);
      expect(readlinkSync(join(snap, path))).toBe(`../../blobs/${f.lfs ? f.sha256 : f.oid}`);
      expect(sha256(join(snap, path))).toBe(f.sha256);
    }
    expect(readFileSync(join(modelsDir, "hf/hub/models--inferd-test--tiny-llama/refs/main"), "utf8")).toBe(
      hub.commit(TINY),
    );
    expect(isPulled(plan, modelsDir)).toEqual(m);
    // Pulled again: everything is complete in the store, nothing is fetched.
    hub.clearRequests();
    expect(await pullModel(plan, { modelsDir, hub: client() })).toEqual(m);
    expect(resolves()).toEqual([]);
  });

  test("a URL file: its size from a HEAD, its sha256 computed, stored under url/", async () => {
    const modelsDir = tempDir("store");
    const url = `${hub.url}/${GGUF}/resolve/main/Model-Q4_K_M.gguf`;
    const f = hub.file(GGUF, "Model-Q4_K_M.gguf");
    const plan = await client().plan(parseSource(url));
    expect(plan).toMatchObject({
      revision: "",
      entry: "Model-Q4_K_M.gguf",
      files: [{ path: "Model-Q4_K_M.gguf", size: f.size, sha256: null, url }],
    });
    const m = await pullModel(plan, { modelsDir, hub: client() });
    expect(m.entry).toBe(join(urlDir(modelsDir, url), "Model-Q4_K_M.gguf"));
    expect(m.files).toEqual([{ path: "Model-Q4_K_M.gguf", size: f.size, sha256: f.sha256 }]);
    expect(sha256(m.entry)).toBe(f.sha256);
    expect(isPulled(plan, modelsDir)?.entry).toBe(m.entry);
  });

  test("a local file is registered where it is, not copied", async () => {
    const dir = tempDir("local");
    const path = join(dir, "mine.gguf");
    writeFileSync(path, "GGUF....");
    const plan = await client().plan(parseSource(path));
    const m = await pullModel(plan, { modelsDir: tempDir("store"), hub: client() });
    expect([m.entry, m.dir, m.bytes]).toEqual([path, dir, 8]);
    expect(hub.requests()).toEqual([]);
    expect((await client().plan(parseSource(dir))).files.map((f) => f.path)).toEqual(["mine.gguf"]);
  });

  test("progress over the whole model, with an injected clock", async () => {
    let now = 0;
    const seen: PullProgress[] = [];
    const plan = await client().plan(parseSource(`hf:${GGUF}:Q6_K`));
    const total = plan.files.reduce((a, f) => a + f.size, 0);
    await pullModel(plan, {
      modelsDir: tempDir("store"),
      hub: client(),
      clock: () => (now += 10),
      progressIntervalMs: 0,
      onProgress: (p) => seen.push(p),
    });
    expect(seen[0]).toMatchObject({ bytes_done: 0, bytes_total: total, percent: 0, files_done: 0, files_total: 4 });
    expect(seen.at(-1)).toMatchObject({ bytes_done: total, percent: 100, eta_s: 0, files_done: 4, files_total: 4 });
    expect(seen.every((p, i) => i === 0 || p.bytes_done >= seen[i - 1].bytes_done)).toBe(true);
    expect(seen.some((p) => p.rate_bps > 0 && p.eta_s !== null && p.eta_s > 0)).toBe(true);
  });
});
