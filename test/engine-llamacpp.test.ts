/**
 * llama.cpp as it really is (issue 34): a 2025 llama-server binds its port before loading and answers
 * /v1/models 200 meanwhile, so only /health says the model is loaded (H1); its API keys come from
 * `--api-key` (a comma list), LLAMA_API_KEY or `--api-key-file` (M5). The fake llama-server behaves
 * per build (FAKE_LLAMA_BUILD; test/fixtures/fake-runtime.ts `modelsWhileLoading`).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { llamacpp } from "../agent/engines/llamacpp";
import { checkLaunch } from "../agent/launch-policy";
import { writeTinyGguf } from "./fixtures/gguf";
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
