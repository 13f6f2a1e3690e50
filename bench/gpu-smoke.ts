#!/usr/bin/env bun
/**
 * GPU smoke test: run on a GPU machine with real engines installed. It starts inferd from this
 * checkout, finds which engines are here (vLLM, SGLang, llama.cpp's llama-server, Ollama), launches
 * each through inferd on a small model, and checks with real requests (the `openai` package as the
 * client) what inferd assumes of the engine: ready only when loaded, its slots, an API key in its
 * command, its served name, streaming usage, tool calls, and GPU selection. Prints one table and
 * `gpu-smoke: N ok, M failed, K skipped`; exits 1 when a check failed.
 *
 *   bun bench/gpu-smoke.ts [--only vllm,sglang,llamacpp,ollama] [--vllm-model M] [--sglang-model M]
 *                          [--llama-model FILE.gguf] [--ollama-model NAME] [--fakes]
 *
 * Models must be reachable from the machine: a local path, a hub the machine can reach (or its
 * cache, with HF_HUB_OFFLINE=1), an Ollama model already pulled. `--fakes` runs the test doubles of
 * test/fixtures (fake engines and nvidia-smi, a tiny GGUF) instead, to check the script itself.
 */
import { join } from "node:path";
import OpenAI from "openai";
import { writeTinyGguf } from "../test/fixtures/gguf";
import { fixtureEnv } from "../test/fixtures/index";
import {
  adminCaller,
  type Cell,
  hardLimit,
  printTable,
  REPO_ROOT,
  runtimePids,
  spawnWithTail,
  waitForListening,
} from "./lib";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";

/** The command line, read. */
function options(argv: string[]) {
  const value = (name: string) => {
    const i = argv.indexOf(name);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  return {
    fakes: argv.includes("--fakes"),
    only: value("--only")?.split(","),
    models: {
      vllm: value("--vllm-model") ?? "Qwen/Qwen2.5-0.5B-Instruct",
      sglang: value("--sglang-model") ?? "Qwen/Qwen2.5-0.5B-Instruct",
      llamacpp: value("--llama-model"),
      ollama: value("--ollama-model") ?? "qwen2.5:0.5b",
    } as Record<string, string | undefined>,
  };
}

/** The process group of `pid` (/proc/<pid>/stat field 5), or undefined when it is gone. */
function pgidOf(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "latin1");
    return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[2]);
  } catch {
    return undefined;
  }
}

/** How to launch one engine: whether it is here, and the command for a model (with extra flags). */
interface Probe {
  backend: string;
  found(env: Record<string, string>): boolean;
  command(model: string, extra: string[]): string | undefined;
  /** Flags that turn tool calling on, and the API key flag (none: the engine takes no key in its command). */
  tools: string[];
  keyFlag?: string;
}

const which = (cmd: string, env: Record<string, string>) => Bun.which(cmd, { PATH: env.PATH ?? "" }) !== null;

const PROBES: Probe[] = [
  {
    backend: "vllm",
    found: (env) => which("vllm", env),
    command: (m, extra) => ["vllm serve", m, "--max-model-len 4096", ...extra].join(" "),
    tools: ["--enable-auto-tool-choice", "--tool-call-parser hermes"],
    keyFlag: "--api-key",
  },
  {
    backend: "sglang",
    found: (env) =>
      which("sglang", env) ||
      Bun.spawnSync(["python3", "-c", "import sglang"], { env, stderr: "ignore" }).exitCode === 0,
    command: (m, extra) => ["python3 -m sglang.launch_server --model-path", m, ...extra].join(" "),
    tools: ["--tool-call-parser qwen25"],
    keyFlag: "--api-key",
  },
  {
    backend: "llamacpp",
    found: (env) => which("llama-server", env),
    command: (m, extra) => ["llama-server -m", `'${m}'`, "-c 4096 -ngl 999", ...extra].join(" "),
    tools: ["--jinja"],
    keyFlag: "--api-key",
  },
  {
    backend: "ollama",
    found: (env) => which("ollama", env),
    command: () => undefined,
    tools: [],
  },
];

type Row = [string, string, string];

/** Runs the checks of one engine; every outcome becomes a row (`ok`, `FAIL <why>`, `skipped <why>`). */
async function checkEngine(
  p: Probe,
  model: string,
  ctx: {
    admin: ReturnType<typeof adminCaller>;
    url: string;
    key: string;
    env: Record<string, string>;
    dataDir: string;
  },
): Promise<Row[]> {
  const rows: Row[] = [];
  const row = (check: string, result: string) => rows.push([p.backend, check, result]);
  const attempt = async (check: string, fn: () => Promise<string | undefined>) => {
    try {
      row(check, (await fn()) ?? "ok");
    } catch (e) {
      row(check, `FAIL ${(e instanceof Error ? e.message : String(e)).split("\n")[0].slice(0, 160)}`);
    }
  };
  const create = async (name: string, extra: string[]) => {
    const command = p.command(model, extra);
    const w = await ctx.admin(`/admin/projects/smoke/workloads`, {
      body: {
        name,
        backend: p.backend,
        model_name: p.backend === "ollama" ? model : name,
        ...(command ? { config: { command } } : {}),
      },
    });
    return w as { id: string; slug: string };
  };
  const ready = async (id: string) => {
    const deadline = Date.now() + 15 * 60_000;
    for (;;) {
      const d = await ctx.admin(`/admin/workloads/${id}`);
      const a = d.assignments?.[0];
      if (a?.state === "ready") return a as { concurrency: number; gpu_indices: number[]; base_url?: string };
      if (a?.state === "failed") throw new Error(`failed: ${a.reason}`);
      if (Date.now() > deadline) throw new Error(`not ready within 15 min (${a?.state ?? "unplaced"})`);
      await Bun.sleep(500);
    }
  };
  const client = (slug: string) =>
    new OpenAI({ baseURL: `${ctx.url}/endpoint/smoke/${slug}/v1`, apiKey: ctx.key, maxRetries: 0 });
  const chat = (slug: string, name: string) =>
    client(slug).chat.completions.create({
      model: name,
      messages: [{ role: "user", content: "Say hi." }],
      max_tokens: 8,
    });

  const name = `${p.backend}-smoke`;
  const main = await create(name, []);
  const servedAs = p.backend === "ollama" ? model : name;
  let assignment: Awaited<ReturnType<typeof ready>> | undefined;
  await attempt("ready only when loaded", async () => {
    assignment = await ready(main.id);
    await chat(main.slug, servedAs); // a 503 "loading" right after ready throws here
    return undefined;
  });
  if (!assignment) return rows;
  await attempt(
    "slots",
    async () => `ok: ${assignment!.concurrency} requests at once (inferd doctor --engines says why)`,
  );
  await attempt("served name", async () => {
    const ids = (await client(main.slug).models.list()).data.map((m) => m.id);
    if (!ids.includes(servedAs)) throw new Error(`/v1/models lists ${ids.join(", ")}, not ${servedAs}`);
    return undefined;
  });
  await attempt("streaming usage", async () => {
    const stream = await client(main.slug).chat.completions.create({
      model: servedAs,
      messages: [{ role: "user", content: "Count to three." }],
      max_tokens: 16,
      stream: true,
      stream_options: { include_usage: true },
    });
    let usage: { completion_tokens?: number } | undefined;
    for await (const chunk of stream) usage = chunk.usage ?? usage;
    if (!usage?.completion_tokens) throw new Error("no usage chunk at the end of the stream");
    return undefined;
  });
  await attempt("GPU selection", async () => {
    if (!assignment!.gpu_indices?.length) return "skipped (no GPU assigned)";
    const smi = (query: string) =>
      Bun.spawnSync(["nvidia-smi", query, "--format=csv,noheader"], { env: ctx.env }).stdout.toString().trim();
    const uuids = new Map(
      smi("--query-gpu=index,uuid")
        .split("\n")
        .map((l) => l.split(",").map((x) => x.trim()) as [string, string]),
    );
    // The runtime's process group (the agent records it), and the GPUs its processes use.
    const group = runtimePids(ctx.dataDir).find((r) =>
      r.argv.join(" ").includes(p.backend === "ollama" ? "ollama serve" : name),
    )?.pid;
    if (!group) return "skipped (the runtime's process is not known)";
    const used = smi("--query-compute-apps=pid,gpu_uuid")
      .split("\n")
      .map((l) => l.split(",").map((x) => x.trim()))
      .filter(([pid]) => pgidOf(Number(pid)) === group)
      .map(([, uuid]) => uuid);
    const wanted = assignment!.gpu_indices.map((i) => uuids.get(String(i)));
    if (!used.length)
      throw new Error(
        `nvidia-smi shows no process of the runtime on a GPU (assigned ${assignment!.gpu_indices.join(",")})`,
      );
    const wrong = used.filter((u) => !wanted.includes(u));
    if (wrong.length)
      throw new Error(`the runtime uses ${wrong.join(", ")}, not its GPUs ${assignment!.gpu_indices.join(",")}`);
    return undefined;
  });
  if (p.keyFlag)
    await attempt("API key in the command", async () => {
      const keyed = await create(`${p.backend}-keyed`, [p.keyFlag!, "smoke-secret"]);
      await ready(keyed.id);
      await chat(keyed.slug, `${p.backend}-keyed`);
      return undefined;
    });
  if (p.tools.length)
    await attempt("tool calls", async () => {
      const tooled = await create(`${p.backend}-tools`, p.tools);
      await ready(tooled.id);
      const r = await client(tooled.slug).chat.completions.create({
        model: `${p.backend}-tools`,
        messages: [{ role: "user", content: "What is the weather in Paris? Use the tool." }],
        tools: [
          {
            type: "function",
            function: {
              name: "get_weather",
              description: "Current weather for a city",
              parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
            },
          },
        ],
        tool_choice: "required",
        max_tokens: 64,
      });
      if (!r.choices[0]?.message.tool_calls?.length) throw new Error("the answer has no tool call");
      return undefined;
    });
  return rows;
}

const opts = options(process.argv.slice(2));
const dataDir = mkdtempSync(join(tmpdir(), "inferd-smoke-"));
const env: Record<string, string> = opts.fakes
  ? fixtureEnv(
      {
        FAKE_GPUS: "2x NVIDIA H100 80GB HBM3:81559",
        FAKE_LOAD_MS: "300",
        FAKE_GPU_USAGE_DIR: join(dataDir, "gpu-usage"),
      },
      { sglang: true },
    )
  : Object.fromEntries(Object.entries(process.env).filter((e): e is [string, string] => e[1] !== undefined));
if (opts.fakes) {
  opts.models.llamacpp ??= join(dataDir, "tiny.gguf");
  writeTinyGguf(opts.models.llamacpp);
}
const child = spawnWithTail(
  [process.execPath, join(REPO_ROOT, "src/main.ts"), "serve", "--port", "0", "--data-dir", dataDir],
  {
    env: { ...env, INFERD_LOCAL_AGENT: "1" },
    name: "inferd",
  },
);
const cleanup = async () => {
  await child.stop(15_000);
  rmSync(dataDir, { recursive: true, force: true });
};
const limit = hardLimit(60 * 60_000, cleanup);
const rows: Row[] = [];
try {
  const url = await waitForListening(child.proc, child.stdoutHead, 60_000);
  const token =
    /admin token \(.*\): (ik_admin_\S+)/.exec(child.stdoutHead())?.[1] ??
    (await Bun.file(join(dataDir, "admin-token")).text()).trim();
  const admin = adminCaller(url, token);
  await admin("/admin/projects", { body: { name: "smoke", slug: "smoke" } });
  const key = (await admin("/admin/projects/smoke/keys", { body: { name: "smoke", type: "live" } })).secret as string;
  for (const p of PROBES) {
    if (opts.only && !opts.only.includes(p.backend)) continue;
    const model = opts.models[p.backend];
    if (!p.found(env)) rows.push([p.backend, "all", "skipped (not installed)"]);
    else if (!model)
      rows.push([p.backend, "all", `skipped (no model: --${p.backend === "llamacpp" ? "llama" : p.backend}-model)`]);
    else rows.push(...(await checkEngine(p, model, { admin, url, key, env, dataDir })));
  }
} catch (e) {
  rows.push(["inferd", "start", `FAIL ${(e instanceof Error ? e.message : String(e)).split("\n")[0]}`]);
} finally {
  limit.clear();
  await cleanup();
}
printTable(["engine", "check", "result"], rows as Cell[][], "GPU smoke test: each engine through inferd");
const count = (prefix: string) => rows.filter((r) => r[2].startsWith(prefix)).length;
console.log(`gpu-smoke: ${count("ok")} ok, ${count("FAIL")} failed, ${count("skipped")} skipped`);
process.exit(count("FAIL") ? 1 : 0);
