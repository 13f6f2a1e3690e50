import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { startServing, type Serving } from "./helpers/serving";
import { cleanup, tempDir } from "./helpers/proc";
import { projectSnippets, snippets } from "../ui/components/snippets";
import { boundaryOf, withModelField } from "../src/multipart";

/**
 * The dashboard's "Use it" snippets, one task type at a time, run for real against `inferd serve`
 * with the fake vLLM (it answers every route the task types use): the curl command as printed, the
 * JavaScript with the official `openai` package (or fetch for job-only types), and the Python checked
 * to compile (the `openai` Python package cannot be installed here).
 */
const HOOK_MS = 90_000;
const TYPES = [
  "text2text",
  "image2text",
  "embedding",
  "text2image",
  "image2image",
  "text2audio",
  "audio2text",
  "forecast",
  "reranker",
] as const;
let srv: Serving;
const made: Record<string, { slug: string; task_type: string; project_slug: string; model_name: string }> = {};
let work: string;
/** Inside the repository, so the snippets' `import "openai"` finds its node_modules. */
const scripts = join(import.meta.dir, ".tmp", `snippets-${process.pid}`);

beforeAll(async () => {
  srv = await startServing({ FAKE_GPUS: `${TYPES.length}x NVIDIA GeForce RTX 4090:24564` });
  for (const t of TYPES) {
    const w = await srv.createWorkload({
      name: `use-${t}`,
      backend: "vllm",
      model_name: `m-${t}`,
      task_type: t,
      config: { command: `vllm serve m-${t}` },
    });
    made[t] = { slug: w.slug, task_type: t, project_slug: srv.project, model_name: `m-${t}` };
  }
  await Promise.all(
    Object.values(made).map(async (w) =>
      srv.waitState(
        (await (await srv.admin(`/admin/projects/${srv.project}/workloads`)).json()).find(
          (x: { slug: string }) => x.slug === w.slug,
        ).id,
      ),
    ),
  );
  work = tempDir("snippet-work");
  writeFileSync(
    join(work, "input.png"),
    Buffer.from(
      "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==",
      "base64",
    ),
  );
  writeFileSync(join(work, "audio.wav"), new Uint8Array(2048));
  mkdirSync(scripts, { recursive: true });
}, HOOK_MS);
afterAll(async () => {
  await srv?.stop();
  await cleanup();
}, HOOK_MS);

const run = (cmd: string[], cwd = work) => {
  const p = Bun.spawnSync(cmd, { cwd, stdout: "pipe", stderr: "pipe", env: { ...process.env } });
  return { code: p.exitCode, out: p.stdout.toString(), err: p.stderr.toString() };
};

describe("an upload's model field", () => {
  const form = (fields: [string, string | Uint8Array][], boundary = "----b0undary") => {
    const parts = fields.map(([k, v]) =>
      Buffer.concat([
        Buffer.from(
          `--${boundary}\r\nContent-Disposition: form-data; name="${k}"${typeof v === "string" ? "" : '; filename="a.wav"\r\nContent-Type: audio/wav'}\r\n\r\n`,
        ),
        Buffer.from(v),
        Buffer.from("\r\n"),
      ]),
    );
    return Buffer.concat([...parts, Buffer.from(`--${boundary}--\r\n`)]);
  };
  const stream = async (body: Uint8Array, chunk: number) => {
    const s = new ReadableStream<Uint8Array>({
      start(c) {
        for (let i = 0; i < body.length; i += chunk) c.enqueue(body.subarray(i, i + chunk));
        c.close();
      },
    });
    return Buffer.from(
      await new Response(withModelField(s, "----b0undary", "Qwen/Qwen3-8B", ["default", "chat"])).arrayBuffer(),
    );
  };
  const file = new Uint8Array(200_000).map((_, i) => i % 251);

  test("default (or the slug) becomes the served name wherever the chunks split; the file's bytes are untouched", async () => {
    for (const chunk of [1, 7, 4096, 1 << 20]) {
      expect(
        await stream(
          form([
            ["model", "default"],
            ["file", file],
          ]),
          chunk,
        ),
      ).toEqual(
        form([
          ["model", "Qwen/Qwen3-8B"],
          ["file", file],
        ]),
      );
      expect(
        await stream(
          form([
            ["model", "chat"],
            ["language", "en"],
          ]),
          chunk,
        ),
      ).toEqual(
        form([
          ["model", "Qwen/Qwen3-8B"],
          ["language", "en"],
        ]),
      );
    }
  });

  test("another name or no field at all: the body goes as it came; a model field after a large file is set too", async () => {
    for (const body of [
      form([
        ["model", "gpt-4o"],
        ["file", file],
      ]),
      form([["file", file]]),
    ])
      expect(await stream(body, 1000)).toEqual(body);
    expect(
      await stream(
        form([
          ["file", file],
          ["model", "default"],
        ]),
        1000,
      ),
    ).toEqual(
      form([
        ["file", file],
        ["model", "Qwen/Qwen3-8B"],
      ]),
    );
    expect(boundaryOf('multipart/form-data; boundary="a b"')).toBe("a b");
    expect(boundaryOf("application/json")).toBeUndefined();
  });
});

/** Runs one set of snippets: the curl command as printed, the JavaScript, and the Python compiled. */
function runSnippets(t: string, s: ReturnType<typeof snippets>, jobs: boolean) {
  const curl = run(["bash", "-c", `${s.curl} -sS -w '\\n%{http_code}'`]);
  expect(curl.err).toBe("");
  expect(curl.out.trim().split("\n").at(-1)).toBe(jobs ? "202" : "200");
  const file = join(scripts, `${t}.mjs`);
  writeFileSync(file, s.js);
  const js = run(["bun", file]);
  expect(js.err).toBe("");
  expect(js.code).toBe(0);
  if (t === "text2image" || t === "image2image")
    expect(readFileSync(join(work, "image.png")).subarray(1, 4).toString()).toBe("PNG");
  else if (t === "text2audio") expect(readFileSync(join(work, "speech.wav")).subarray(0, 4).toString()).toBe("RIFF");
  else expect(js.out.trim().length).toBeGreaterThan(0);
  // The job-only snippet submits a job and reads it back by its id.
  if (jobs) expect(js.out).toMatch(/status: "(queued|running|completed)"/);
  const py = join(scripts, `${t}.py`);
  writeFileSync(py, s.python);
  expect(run(["python3", "-m", "py_compile", py]).code).toBe(0);
}

describe("snippets fitted to the task type", () => {
  for (const t of TYPES) {
    test(`${t}: the curl and JavaScript snippets answer, the Python compiles`, () => {
      const s = snippets(made[t], srv.live, srv.url);
      const jobs = t === "reranker";
      runSnippets(t, s, jobs);
      expect(s.curl).toContain(
        jobs ? `/endpoint/${srv.project}/${made[t].slug}/jobs` : `/endpoint/${srv.project}/${made[t].slug}/v1/`,
      );
    });
  }
});

/** Task types served on the project's base URL (uploads are routed by their multipart `model` field). */
const ROUTED = [
  "text2text",
  "image2text",
  "embedding",
  "text2image",
  "text2audio",
  "forecast",
  "audio2text",
  "image2image",
] as const;

describe("snippets through the project's base URL, routed by the model name", () => {
  for (const t of ROUTED) {
    test(`${t}: one base URL for nine workloads, the model name picks this one`, () => {
      const s = projectSnippets(made[t], srv.live, srv.url)!;
      runSnippets(t, s, false);
      expect(s.curl).toContain(`/endpoint/${srv.project}/v1/`);
      expect(s.js).toContain(`baseURL: "${srv.url}/endpoint/${srv.project}/v1"`);
      expect(s.python).toContain(`base_url="${srv.url}/endpoint/${srv.project}/v1"`);
    });
  }

  test("job-only task types have none: the project's base URL serves no jobs", () => {
    expect(projectSnippets(made.reranker, srv.live, srv.url)).toBeUndefined();
  });
});
