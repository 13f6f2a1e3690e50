/**
 * Unit tests of the model-pulling library's pure parts: source parsing, file selection (quant tags,
 * split GGUFs, the snapshot filter), progress and ETA with an injected clock, the download limiter,
 * store paths, redirect handling (credentials never leave the hub's origin) and the fake's Range parser.
 */
import { describe, expect, test } from "bun:test";
import { inlineHasher, workerHasher } from "../agent/models/hasher";
import { fetchFollowing, startFromContentRange, totalFromContentRange } from "../agent/models/http";
import { DownloadLimiter, Progress } from "../agent/models/progress";
import { availableQuants, ggufName, isModelGguf, pickQuant, snapshotFiles, splitParts } from "../agent/models/select";
import { llamaHfArg, llamaHfFileArgs, parseSource, SourceError, sourceKey } from "../agent/models/source";
import { blobPath, repoCacheDir, snapshotDir, urlDir } from "../agent/models/store";
import { parseRange } from "./fixtures/hf-hub-bytes";

describe("parseSource", () => {
  const good: [string, unknown][] = [
    ["hf:Qwen/Qwen3-0.6B", { kind: "hf-repo", repo: "Qwen/Qwen3-0.6B", revision: "main" }],
    ["hf:Qwen/Qwen3-0.6B@v1.0", { kind: "hf-repo", repo: "Qwen/Qwen3-0.6B", revision: "v1.0" }],
    ["hf:o/m@refs/pr/3", { kind: "hf-repo", repo: "o/m", revision: "refs/pr/3" }],
    [
      "hf:o/m-GGUF/sub/m-Q4_K_M.gguf",
      { kind: "hf-file", repo: "o/m-GGUF", revision: "main", file: "sub/m-Q4_K_M.gguf" },
    ],
    ["hf:o/m-GGUF@abc/m.gguf", { kind: "hf-file", repo: "o/m-GGUF", revision: "abc", file: "m.gguf" }],
    ["hf:o/m-GGUF:q8_0", { kind: "hf-quant", repo: "o/m-GGUF", revision: "main", quant: "q8_0" }],
    ["hf:o/m-GGUF@dev:UD-Q4_K_XL", { kind: "hf-quant", repo: "o/m-GGUF", revision: "dev", quant: "UD-Q4_K_XL" }],
    ["https://huggingface.co/o/m", { kind: "hf-repo", repo: "o/m", revision: "main" }],
    [
      "https://huggingface.co/o/m/resolve/main/a/b.gguf",
      { kind: "hf-file", repo: "o/m", revision: "main", file: "a/b.gguf" },
    ],
    [
      "https://huggingface.co/o/m/blob/v2/b.gguf?download=true",
      { kind: "hf-file", repo: "o/m", revision: "v2", file: "b.gguf" },
    ],
    ["https://example.org/models/x.gguf", { kind: "url", url: "https://example.org/models/x.gguf" }],
    ["http://127.0.0.1:8080/x.gguf", { kind: "url", url: "http://127.0.0.1:8080/x.gguf" }],
    ["http://localhost/x.gguf", { kind: "url", url: "http://localhost/x.gguf" }],
    ["/models/llama/", { kind: "local", path: "/models/llama" }],
    ["file:///models/x.gguf", { kind: "local", path: "/models/x.gguf" }],
    ["  hf:o/m  ", { kind: "hf-repo", repo: "o/m", revision: "main" }],
  ];
  for (const [spec, want] of good)
    test(`parses ${spec.trim()}`, () => expect(parseSource(spec)).toEqual(want as never));

  const bad: [string, RegExp][] = [
    ["", /empty/],
    ["hf:", /does not name a repo/],
    ["hf:justaname", /does not name a repo/],
    ["hf:o/m/extra/", /not a file path/],
    ["hf:o/m/../etc/passwd", /not a file path/],
    ["hf:o/m@", /empty revision/],
    ["hf:o/m:", /not a quantisation tag/],
    ["hf:o/m:Q4 K", /not a quantisation tag/],
    ["hf:-o/m", /not a Hugging Face repo id/],
    ["hf:o/m--x", /'--' and '..'/],
    ["hf:o/m.git", /\.git/],
    [`hf:o/${"a".repeat(97)}`, /longer than 96/],
    ["http://example.org/x.gguf", /only for loopback/],
    ["ftp://example.org/x.gguf", /only https/],
    ["https://user:pw@example.org/x.gguf", /credentials/],
    ["https://example.org/", /file name/],
    ["https://huggingface.co/o/m/discussions/1", /hub page/],
    ["models/x.gguf", /absolute path/],
  ];
  for (const [spec, why] of bad) {
    test(`refuses ${JSON.stringify(spec)}`, () => {
      expect(() => parseSource(spec)).toThrow(SourceError);
      expect(() => parseSource(spec)).toThrow(why);
    });
  }

  test("llama-server's -hf / -hfr -hff forms", () => {
    expect(llamaHfArg("ggml-org/gemma-3-1b-it-GGUF")).toEqual({
      kind: "hf-quant",
      repo: "ggml-org/gemma-3-1b-it-GGUF",
      revision: "main",
      quant: "Q4_K_M",
      defaulted: true,
    });
    expect(llamaHfArg("o/m:Q8_0")).toEqual({ kind: "hf-quant", repo: "o/m", revision: "main", quant: "Q8_0" });
    expect(llamaHfFileArgs("o/m", "x-Q4_0.gguf")).toEqual({
      kind: "hf-file",
      repo: "o/m",
      revision: "main",
      file: "x-Q4_0.gguf",
    });
    expect(() => llamaHfArg("nope")).toThrow(SourceError);
  });

  test("sourceKey is stable and equal for the same thing", () => {
    expect(sourceKey(parseSource("hf:o/m:q4_k_m"))).toBe(sourceKey(parseSource("hf:o/m:Q4_K_M")));
    expect(sourceKey(parseSource("hf:o/m"))).toBe("hf:o/m@main");
    expect(sourceKey(llamaHfArg("o/m"))).not.toBe(sourceKey(llamaHfArg("o/m:Q4_K_M")));
    expect(sourceKey(parseSource("/a/b/"))).toBe(sourceKey(parseSource("/a/b")));
  });
});

describe("file selection", () => {
  const files = [
    "mmproj-M-Q4_K_M.gguf",
    "M-IQ4_XS.gguf",
    "M-Q4_K_M.gguf",
    "M-q8_0.gguf",
    "big/M-Q6_K-00002-of-00002.gguf",
    "big/M-Q6_K-00001-of-00002.gguf",
    "README.md",
  ].map((path) => ({ path }));

  test("GGUF names split into prefix, tag and part", () => {
    expect(ggufName("big/M-Q6_K-00002-of-00002.gguf")).toEqual({
      prefix: "big/M-Q6_K",
      tag: "Q6_K",
      index: 2,
      count: 2,
    });
    expect(ggufName("x.Q5_K_S.gguf")?.tag).toBe("Q5_K_S");
    expect(ggufName("config.json")).toBeNull();
    expect(isModelGguf("sub/mmproj-F16.gguf")).toBe(false);
    expect(isModelGguf("M-imatrix.gguf")).toBe(false);
  });

  test("a tag picks its GGUF, case-insensitively, never an mmproj", () => {
    expect(pickQuant(files, "q4_k_m")?.path).toBe("M-Q4_K_M.gguf");
    expect(pickQuant(files, "Q8_0")?.path).toBe("M-q8_0.gguf");
    expect(pickQuant(files, "Q4_K")).toBeUndefined(); // a tag is followed by '.' or '-', as in llama.cpp
    expect(pickQuant([{ path: "mmproj-M-Q4_K_M.gguf" }], "Q4_K_M")).toBeUndefined();
  });

  test("a split GGUF is picked by its first part and fetched whole", () => {
    const first = pickQuant(files, "Q6_K")!;
    expect(first.path).toBe("big/M-Q6_K-00001-of-00002.gguf");
    expect(splitParts(files, first).map((f) => f.path)).toEqual([
      "big/M-Q6_K-00001-of-00002.gguf",
      "big/M-Q6_K-00002-of-00002.gguf",
    ]);
    expect(splitParts(files, { path: "M-Q4_K_M.gguf" })).toEqual([{ path: "M-Q4_K_M.gguf" }]);
  });

  test("no tag: Q4_K_M, then Q8_0, then the first model GGUF (llama.cpp's chain)", () => {
    expect(pickQuant(files, "Q4_K_M", true)?.path).toBe("M-Q4_K_M.gguf");
    expect(pickQuant([{ path: "mmproj-X-Q4_K_M.gguf" }, { path: "X-Q8_0.gguf" }], "Q4_K_M", true)?.path).toBe(
      "X-Q8_0.gguf",
    );
    expect(pickQuant([{ path: "mmproj-X.gguf" }, { path: "X-F16.gguf" }], "Q4_K_M", true)?.path).toBe("X-F16.gguf");
    expect(availableQuants(files)).toEqual(["IQ4_XS", "Q4_K_M", "Q8_0", "Q6_K"]);
  });

  test("a snapshot keeps configs, tokenizers and safetensors, and drops other weights and docs", () => {
    const repo = [
      "config.json",
      "generation_config.json",
      "tokenizer.json",
      "tokenizer.model",
      "tokenizer_config.json",
      "chat_template.jinja",
      "modeling_x.py",
      "model-00001-of-00002.safetensors",
      "model-00002-of-00002.safetensors",
      "model.safetensors.index.json",
      "pytorch_model.bin",
      "pytorch_model.bin.index.json",
      "flax_model.msgpack",
      "tf_model.h5",
      "rust_model.ot",
      "model.onnx",
      "x.gguf",
      "README.md",
      "assets/logo.png",
      ".gitattributes",
      "original/consolidated.00.pth",
      "original/params.json",
      "onnx/model.onnx",
      "LICENSE",
    ].map((path) => ({ path }));
    expect(snapshotFiles(repo).map((f) => f.path)).toEqual([
      "config.json",
      "generation_config.json",
      "tokenizer.json",
      "tokenizer.model",
      "tokenizer_config.json",
      "chat_template.jinja",
      "modeling_x.py",
      "model-00001-of-00002.safetensors",
      "model-00002-of-00002.safetensors",
      "model.safetensors.index.json",
      "pytorch_model.bin.index.json",
      "LICENSE",
    ]);
    // Without safetensors, the PyTorch weights are the ones a runtime loads.
    expect(
      snapshotFiles([{ path: "config.json" }, { path: "pytorch_model.bin" }, { path: "model.onnx" }]).map(
        (f) => f.path,
      ),
    ).toEqual(["config.json", "pytorch_model.bin"]);
  });
});

describe("progress and limiter", () => {
  test("rate over a sliding window, percent and ETA from an injected clock", () => {
    let now = 0;
    const p = new Progress(10_000, { clock: () => now, windowMs: 2000 });
    p.set(4000); // resumed: bytes already there do not count as speed
    expect(p.snapshot()).toEqual({ bytes_done: 4000, bytes_total: 10_000, percent: 40, rate_bps: 0, eta_s: null });
    now = 1000;
    p.set(5000);
    expect(p.snapshot()).toMatchObject({ rate_bps: 1000, eta_s: 5, percent: 50 });
    now = 2000;
    p.add(2000);
    expect(p.snapshot()).toMatchObject({ bytes_done: 7000, rate_bps: 1500, eta_s: 2 });
    now = 4000; // the window now starts at 2000: only the recent (slower) pace counts
    p.set(7500);
    expect(p.snapshot()).toMatchObject({ rate_bps: 250, eta_s: 10 });
    now = 5000;
    p.set(10_000);
    expect(p.snapshot()).toMatchObject({ percent: 100, eta_s: 0 });
    expect(new Progress(-1, { clock: () => 0 }).snapshot().eta_s).toBeNull();
  });

  test("the limiter bounds concurrent runs and lets a waiting caller leave", async () => {
    const limiter = new DownloadLimiter(2);
    let running = 0;
    let peak = 0;
    const gates: (() => void)[] = [];
    const job = () =>
      limiter.run(async () => {
        peak = Math.max(peak, ++running);
        await new Promise<void>((r) => gates.push(r));
        running--;
      });
    const jobs = [job(), job(), job(), job()];
    await Bun.sleep(0);
    expect([limiter.active, limiter.waiting]).toEqual([2, 2]);
    const ac = new AbortController();
    const leaving = limiter.run(async () => "never", ac.signal);
    ac.abort(new Error("left"));
    await expect(leaving).rejects.toThrow("left");
    while (gates.length || limiter.active) {
      gates.shift()?.();
      await Bun.sleep(0);
    }
    await Promise.all(jobs);
    expect(peak).toBe(2);
  });
});

describe("hashing", () => {
  test("the worker hasher gives the inline digest, taking owned buffers and copying views", async () => {
    const chunks = Array.from({ length: 20 }, (_, i) => new Uint8Array(5 << 20).fill(i));
    const inline = inlineHasher();
    for (const c of chunks) inline.update(c);
    const worker = workerHasher();
    for (const [i, c] of chunks.entries()) await worker.update(i % 2 ? c.subarray(1, c.length - 1) : c.slice());
    const views = inlineHasher();
    for (const [i, c] of chunks.entries()) views.update(i % 2 ? c.subarray(1, c.length - 1) : c);
    expect(await worker.digest()).toBe(await views.digest());
    expect(await inline.digest()).toBe(new Bun.CryptoHasher("sha256").update(Buffer.concat(chunks)).digest("hex"));
  });
});

describe("store paths and HTTP helpers", () => {
  test("Hugging Face cache layout", () => {
    expect(repoCacheDir("/d", "Qwen/Qwen3-0.6B")).toBe("/d/hf/hub/models--Qwen--Qwen3-0.6B");
    expect(snapshotDir("/d", "o/m", "a".repeat(40))).toBe(`/d/hf/hub/models--o--m/snapshots/${"a".repeat(40)}`);
    expect(() => snapshotDir("/d", "o/m", "main")).toThrow();
    expect(() => blobPath("/d", "o/m", "../x")).toThrow();
    expect(urlDir("/d", "https://x.org/m.gguf")).toMatch(/^\/d\/url\/[0-9a-f]{16}$/);
  });

  test("Content-Range and Range parsing", () => {
    expect([
      totalFromContentRange("bytes 0-0/1234"),
      totalFromContentRange("bytes */99"),
      startFromContentRange("bytes 100-199/1000"),
    ]).toEqual([1234, 99, 100]);
    expect([parseRange("bytes=100-", 1000), parseRange("bytes=1-2", 1000), parseRange("bytes=-10", 1000)]).toEqual([
      { start: 100, end: 999 },
      { start: 1, end: 2 },
      { start: 990, end: 999 },
    ]);
    expect([parseRange("bytes=1000-", 1000), parseRange("bytes=5-1", 1000), parseRange("bytes=0-1,5-6", 1000)]).toEqual(
      ["unsatisfiable", null, null],
    );
  });

  test("redirects are followed by hand; credentials stay on their origin", async () => {
    const seen: { url: string; auth: string | null; range: string | null }[] = [];
    const fakeFetch = (async (url: string, init: RequestInit) => {
      const h = new Headers(init.headers);
      seen.push({ url, auth: h.get("authorization"), range: h.get("range") });
      expect(init.redirect).toBe("manual");
      if (url.startsWith("https://hub.test/a")) return new Response(null, { status: 302, headers: { location: "/b" } });
      if (url.startsWith("https://hub.test/b"))
        return new Response(null, { status: 302, headers: { location: "https://cdn.test/blob" } });
      return new Response("ok");
    }) as unknown as typeof fetch;
    const { res, url } = await fetchFollowing("https://hub.test/a", {
      fetch: fakeFetch,
      headers: { range: "bytes=5-" },
      credentials: { origin: "https://hub.test", headers: { authorization: "Bearer t" } },
    });
    expect([res.status, url]).toEqual([200, "https://cdn.test/blob"]);
    expect(seen.map((s) => s.auth)).toEqual(["Bearer t", "Bearer t", null]);
    expect(seen.every((s) => s.range === "bytes=5-")).toBe(true);
  });
});
