/**
 * llama.cpp as it really is (issue 34): a 2025 llama-server binds its port before loading and answers
 * /v1/models 200 meanwhile, so only /health says the model is loaded (H1); its API keys come from
 * `--api-key` (a comma list), LLAMA_API_KEY or `--api-key-file` (M5). The fake llama-server behaves
 * per build (FAKE_LLAMA_BUILD; test/fixtures/fake-runtime.ts `modelsWhileLoading`). Its `-hf` also
 * loads the repo's vision projector (M7): inferd pulls it with the quant and passes `--mmproj`.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { llamacpp } from "../agent/engines/llamacpp";
import { checkLaunch } from "../agent/launch-policy";
import { bestProjector, quantBits } from "../agent/models/select";
import { writeTinyGguf } from "./fixtures/gguf";
import { startFakeHub, type FakeHub } from "./fixtures/hf-hub";
import { ggufRepo } from "./fixtures/hf-repos";
import { tenantPolicy } from "./helpers/launch";
import { cleanup, tempDir } from "./helpers/proc";
import { startServing, type Serving } from "./helpers/serving";

afterAll(cleanup);

describe("what a tenant's llama-server may download (M8)", () => {
  const policy = tenantPolicy();
  const check = (command: string) => checkLaunch(policy, "llamacpp", { command })?.setting ?? null;
  test("a projector URL (-mmu) obeys the model-URL rules, as -mu does", () => {
    expect(check("llama-server -mu https://10.0.0.1/m.gguf")).toContain("--allow-private-model-urls");
    expect(check("llama-server -hf o/r -mmu https://10.0.0.1/mmproj.gguf")).toContain("--allow-private-model-urls");
    expect(check("llama-server -hf o/r --mmproj-url http://127.0.0.1:9/x.gguf")).toContain(
      "--allow-private-model-urls",
    );
    expect(check("llama-server -hf o/r -mmu https://models.example.com/mmproj.gguf")).toBeNull();
  });
  test("a Docker registry pull (-dr) is the operator's to allow", () => {
    expect(check("llama-server -dr ai/smollm2")).toContain("--policy-forbidden-flags");
    expect(check("llama-server --docker-repo ai/smollm2")).toContain("--policy-forbidden-flags");
  });
});

describe("the key inferd sends a llama-server", () => {
  test("the first of --api-key's list, else LLAMA_API_KEY's, else --api-key-file's first line", () => {
    expect(llamacpp.apiKeyOf(["llama-server", "--api-key", "k1,k2"], {})).toBe("k1");
    expect(llamacpp.apiKeyOf(["llama-server"], { LLAMA_API_KEY: "env-key" })).toBe("env-key");
    const file = join(tempDir("keys"), "keys.txt");
    writeFileSync(file, "\nfile-key\nother\n");
    expect(llamacpp.apiKeyOf(["llama-server", "--api-key-file", file], {})).toBe("file-key");
    expect(llamacpp.apiKeyOf(["llama-server"], {})).toBeUndefined();
  });
});

describe.each([
  ["a 2025 build (models listed while loading)", "6620"],
  ["a 2024 build (503 everywhere while loading)", "4000"],
])("llama-server, %s", (_what, build) => {
  let s: Serving;
  let gguf: string;
  beforeAll(async () => {
    // A slow load: long enough that a replica called ready early would answer 503 "Loading model".
    s = await startServing({ FAKE_LLAMA_BUILD: build, FAKE_LOAD_MS: "2500" });
    gguf = join(tempDir("gguf"), "tiny.gguf");
    writeTinyGguf(gguf);
  });
  afterAll(() => s.stop());

  test("is ready only once its model is loaded: the first request is answered", async () => {
    const w = await s.createWorkload({
      name: `tiny-${build}`,
      backend: "llamacpp",
      model_name: "tiny",
      config: { command: `llama-server -m '${gguf}' -a tiny` },
    });
    await s.waitState(w.id, "ready", 60_000);
    const r = await s.data(w.slug, "/v1/chat/completions", {
      body: { model: "tiny", messages: [{ role: "user", content: "hi" }], max_tokens: 2 },
    });
    expect(r.status).toBe(200);
  });

  test("keys from a comma list or a key file: ready and serving, never 401", async () => {
    const file = join(tempDir("keyfile"), "keys");
    writeFileSync(file, "from-file\n");
    for (const [name, command] of [
      ["listed", `llama-server -m '${gguf}' -a tiny --api-key first,second`],
      ["filed", `llama-server -m '${gguf}' -a tiny --api-key-file '${file}'`],
    ]) {
      const w = await s.createWorkload({
        name: `${name}-${build}`,
        backend: "llamacpp",
        model_name: "tiny",
        config: { command },
      });
      await s.waitState(w.id, "ready", 60_000);
      const r = await s.data(w.slug, "/v1/chat/completions", {
        body: { model: "tiny", messages: [{ role: "user", content: "hi" }], max_tokens: 2 },
      });
      expect(r.status).toBe(200);
    }
  });
});

describe("the projector llama.cpp's -hf loads beside the model (M7)", () => {
  // llama.cpp common/download.cpp `find_best_sibling(files, model, "mmproj")`, and its own tests
  // (tests/test-model-resolution.cpp): deepest shared folder first, then the closest quant bits.
  const files = (paths: string[]) => paths.map((path) => ({ path }));
  test("quant bits as llama.cpp's extract_quant_bits reads them", () => {
    expect(quantBits("model-Q8_0.gguf")).toBe(8);
    expect(quantBits("model-UD-Q2_K_XL.gguf")).toBe(2);
    expect(quantBits("model.i1-Q6_K.gguf")).toBe(6);
    expect(quantBits("model-BF16.gguf")).toBe(16);
    expect(quantBits("model-MXFP4-00001-of-00002.gguf")).toBe(4);
    expect(quantBits("model.gguf")).toBe(0);
  });
  test("the closest quant, in the model's folder or above it, never another folder's", () => {
    const repo = files([
      "m-Q4_K_M.gguf",
      "m-Q8_0.gguf",
      "mmproj-m-F32.gguf",
      "mmproj-m-F16.gguf",
      "mmproj-m-Q8_0.gguf",
    ]);
    expect(bestProjector(repo, "m-Q8_0.gguf")?.path).toBe("mmproj-m-Q8_0.gguf");
    expect(bestProjector(repo, "m-Q4_K_M.gguf")?.path).toBe("mmproj-m-Q8_0.gguf");
    expect(bestProjector(files(["m-BF16.gguf", "mmproj-F32.gguf", "mmproj-F16.gguf"]), "m-BF16.gguf")?.path).toBe(
      "mmproj-F16.gguf",
    );
    const nested = files(["Q4/m-Q4_K_M.gguf", "mmproj-F16.gguf", "Q4/mmproj-F32.gguf", "BF16/mmproj-BF16.gguf"]);
    expect(bestProjector(nested, "Q4/m-Q4_K_M.gguf")?.path).toBe("Q4/mmproj-F32.gguf");
    expect(bestProjector(files(["Q4/m-Q4_K_M.gguf", "BF16/mmproj-BF16.gguf"]), "Q4/m-Q4_K_M.gguf")).toBeUndefined();
    expect(bestProjector(files(["m-Q4_K_M.gguf", "imatrix.gguf"]), "m-Q4_K_M.gguf")).toBeUndefined();
  });

  describe("a workload started with -hf", () => {
    const REPO = "inferd-test/Vision-GGUF";
    let hub: FakeHub;
    let s: Serving;
    beforeAll(async () => {
      hub = await startFakeHub({
        repos: {
          [REPO]: ggufRepo(join(tempDir("hub"), "vision"), {
            name: "Vision",
            files: ["Vision-Q4_K_M.gguf", "Vision-Q8_0.gguf", "mmproj-Vision-F16.gguf"],
          }),
        },
      });
      s = await startServing({ HF_ENDPOINT: hub.url });
    });
    afterAll(async () => {
      await s?.stop();
      await hub?.stop();
    });
    const image = {
      role: "user",
      content: [
        { type: "text", text: "what is this" },
        { type: "image_url", image_url: { url: "data:image/png;base64,iVBORw0KGgo=" } },
      ],
    };
    const start = async (name: string, command: string) => {
      const w = await s.createWorkload({ name, backend: "llamacpp", model_name: "v", config: { command } });
      await s.waitState(w.id, "ready", 60_000);
      const argv = s.events((e) => e.event === "start" && (e.argv as string[]).includes(name)).at(-1)?.argv as string[];
      return { w, argv };
    };

    test("reads images: the projector is pulled with the quant and given as --mmproj", async () => {
      const { w, argv } = await start("seeing", `llama-server -hf ${REPO}:Q4_K_M -a seeing`);
      const mmproj = argv[argv.indexOf("--mmproj") + 1];
      expect(argv).toContain("--mmproj");
      expect(mmproj).toEndWith("/mmproj-Vision-F16.gguf");
      expect(argv[argv.indexOf("-m") + 1]).toEndWith("/Vision-Q4_K_M.gguf");
      const r = await s.data(w.slug, "/v1/chat/completions", {
        body: { model: "v", messages: [image], max_tokens: 4 },
      });
      expect(r.status).toBe(200);
    });

    test("--no-mmproj, or a projector of its own, is left as the command says", async () => {
      const off = await start("blind", `llama-server -hf ${REPO}:Q8_0 -a blind --no-mmproj`);
      expect(off.argv).not.toContain("--mmproj");
      const r = await s.data(off.w.slug, "/v1/chat/completions", {
        body: { model: "v", messages: [image], max_tokens: 4 },
      });
      expect(r.status).toBeGreaterThanOrEqual(500);
      expect(JSON.stringify(await r.json())).toContain("image input is not supported");
      const own = join(tempDir("own"), "mmproj-own.gguf");
      writeTinyGguf(own);
      const mine = await start("mine", `llama-server -hf ${REPO}:Q8_0 -a mine --mmproj '${own}'`);
      expect(mine.argv.filter((a) => a === "--mmproj")).toHaveLength(1);
      expect(mine.argv[mine.argv.indexOf("--mmproj") + 1]).toBe(own);
    });
  });
});
