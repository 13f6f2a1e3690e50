/**
 * A workload whose command cannot serve its task type is refused at save, naming the flag to add
 * (llama-server's `--embeddings` / `--reranking` / `--mmproj`, SGLang's `--is-embedding`), through
 * the control plane and the admin API, POST and PATCH, on SQLite and PostgreSQL; vLLM, which finds
 * the task from the model, is never refused. Also the projector lookup the workload form uses.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { seedProject, startTestServer, type TestServer } from "./helpers/server";
import type { Engine } from "./helpers/postgres";

/** A refusal in the contract's shape: 400 `validation_error` at `config.command`, naming the flag. */
async function expectRefused(r: Response, flag: string): Promise<void> {
  expect(r.status).toBe(400);
  const { error } = await r.json();
  expect(error).toMatchObject({ code: "validation_error", field: "config.command" });
  expect(error.message).toContain(`needs ${flag}`);
}

function taskSuite(engine: Engine): void {
  describe(`task type and command (${engine})`, () => {
    let s: TestServer;
    let ctx: Awaited<ReturnType<typeof seedProject>>;
    const api = (path: string, body: unknown, method = "POST") => s.call(path, ctx.sdk, { method, body });
    const admin = (path: string, body: unknown, method = "POST") => s.admin(path, { method, body });
    const created = () => `/api/projects/${ctx.project.slug}/workloads`;

    beforeAll(async () => {
      s = await startTestServer({ INFERD_POLICY_MODEL_PATHS: "/models" }, { engine });
      ctx = await seedProject(s, "Tasks", "tasks");
    });
    afterAll(() => s.close());

    test("POST: an embeddings workload on llama.cpp without --embeddings is refused, naming the flag; with it, made", async () => {
      const body = {
        name: "vectors",
        backend: "llamacpp",
        task_type: "embedding",
        model_name: "e",
        config: { command: "llama-server -m /models/e.gguf" },
      };
      const r = await api(created(), body);
      await expectRefused(r.clone(), "--embeddings");
      expect((await r.json()).error.message).toBe(
        "config.command: an embeddings workload on llama.cpp needs --embeddings in its command",
      );
      await expectRefused(await admin(`/admin/projects/${ctx.project.slug}/workloads`, body), "--embeddings");
      expect(
        (await api(created(), { ...body, config: { command: "llama-server -m /models/e.gguf --embeddings" } })).status,
      ).toBe(201);
      expect(
        (
          await api(created(), {
            ...body,
            name: "vectors-2",
            config: { command: "llama-server -m /models/e.gguf --embedding" },
          })
        ).status,
      ).toBe(201);
    });

    test("rerank needs --reranking, vision a projector, SGLang embeddings --is-embedding", async () => {
      const cases = [
        {
          backend: "llamacpp",
          task_type: "reranker",
          command: "llama-server -m /models/r.gguf",
          flag: "--reranking",
          fixed: "llama-server -m /models/r.gguf --reranking",
        },
        {
          backend: "llamacpp",
          task_type: "image2text",
          command: "llama-server -m /models/v.gguf",
          flag: "--mmproj <projector file>",
          fixed: "llama-server -m /models/v.gguf --mmproj=/models/mmproj-v-F16.gguf",
        },
        {
          backend: "sglang",
          task_type: "embedding",
          command: "python3 -m sglang.launch_server --model-path org/embed",
          flag: "--is-embedding",
          fixed: "python3 -m sglang.launch_server --model-path org/embed --is-embedding",
        },
      ];
      for (const [i, c] of cases.entries()) {
        const body = {
          name: `case-${i}`,
          backend: c.backend,
          task_type: c.task_type,
          model_name: `m${i}`,
          config: { command: c.command },
        };
        await expectRefused(await api(created(), body), c.flag);
        expect(
          (await admin(`/admin/projects/${ctx.project.slug}/workloads`, { ...body, config: { command: c.fixed } }))
            .status,
        ).toBe(201);
      }
    });

    test("vLLM finds the task from the model: embeddings and rerank without a flag are made", async () => {
      for (const task_type of ["embedding", "reranker"]) {
        const r = await api(created(), {
          name: `vllm-${task_type}`,
          backend: "vllm",
          task_type,
          model_name: "org/embed",
          config: { command: "vllm serve org/embed" },
        });
        expect(r.status).toBe(201);
      }
    });

    test("PATCH: a new task type, or a command losing its flag, is refused the same way (admin and control plane); a name change alone is not judged", async () => {
      const w = await (
        await api(created(), {
          name: "chatter",
          backend: "llamacpp",
          model_name: "c",
          config: { command: "llama-server -m /models/c.gguf" },
        })
      ).json();
      await expectRefused(await api(`/api/workloads/${w.id}`, { task_type: "embedding" }, "PATCH"), "--embeddings");
      await expectRefused(await admin(`/admin/workloads/${w.id}`, { task_type: "reranker" }, "PATCH"), "--reranking");
      const ok = await admin(
        `/admin/workloads/${w.id}`,
        { task_type: "embedding", config: { command: "llama-server -m /models/c.gguf --embeddings" } },
        "PATCH",
      );
      expect(ok.status).toBe(200);
      expect((await ok.json()).task_type).toBe("embedding");
      await expectRefused(
        await api(`/api/workloads/${w.id}`, { config: { command: "llama-server -m /models/c.gguf" } }, "PATCH"),
        "--embeddings",
      );
      await expectRefused(
        await admin(
          `/admin/workloads/${w.id}`,
          { backend: "sglang", config: { command: "python3 -m sglang.launch_server --model-path org/c" } },
          "PATCH",
        ),
        "--is-embedding",
      );
      expect((await api(`/api/workloads/${w.id}`, { name: "chatter 2" }, "PATCH")).status).toBe(200);
      const stored = await (await s.admin(`/admin/workloads/${w.id}`)).json();
      expect(stored).toMatchObject({
        name: "chatter 2",
        task_type: "embedding",
        config: { command: "llama-server -m /models/c.gguf --embeddings" },
      });
    });
  });
}

taskSuite("sqlite");
taskSuite("postgres");

describe("the projector of a llama.cpp model", () => {
  let s: TestServer;
  let dir = "";
  beforeAll(async () => {
    s = await startTestServer();
    dir = mkdtempSync(join(tmpdir(), "projector-"));
    for (const f of ["Tiny-Q4_K_M.gguf", "Tiny-BF16.gguf", "mmproj-Tiny-Q8_0.gguf", "mmproj-Tiny-F16.gguf"])
      writeFileSync(join(dir, f), "GGUF");
  });
  afterAll(async () => {
    await s.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test("is the mmproj file beside the model (the quantisation closest to the model's, as llama.cpp's -hf picks it); none for a model without one; a missing model name is a 400", async () => {
    const at = async (model: string) => (await s.admin(`/admin/projector?model=${encodeURIComponent(model)}`)).json();
    expect(await at(join(dir, "Tiny-Q4_K_M.gguf"))).toEqual({
      model: join(dir, "Tiny-Q4_K_M.gguf"),
      projector: join(dir, "mmproj-Tiny-Q8_0.gguf"),
    });
    expect((await at(join(dir, "Tiny-BF16.gguf"))).projector).toBe(join(dir, "mmproj-Tiny-F16.gguf"));
    expect((await at("/nowhere/model.gguf")).projector).toBeNull();
    expect((await at("someone/Tiny-GGUF:Q8_0")).projector).toBeNull();
    const bad = await s.admin("/admin/projector");
    expect(bad.status).toBe(400);
    expect((await bad.json()).error.field).toBe("model");
  });
});
