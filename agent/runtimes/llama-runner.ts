/**
 * The built-in llama.cpp runtime: a stand-in for `llama-server` backed by node-llama-cpp, run as
 * its own child process with llama-server's flags:
 *
 *   bun agent/runtimes/llama-runner.ts [llama-server] -m model.gguf --port 8080 -np 2 --embedding
 *
 * It serves llama-server's OpenAI-style API on --host/--port: /health (503 while loading),
 * /v1/models, /v1/chat/completions, /v1/completions and /v1/embeddings, with SSE streaming.
 * Set INFERD_NODE_MODULES to a node_modules dir holding node-llama-cpp when it is not resolvable
 * from this file (the compiled binary runs an unpacked, bundled copy of this script).
 */
import { LlamaArgsError, parseLlamaServerArgs, type LlamaRunnerOptions } from "./llama-runner-args.ts";
import { loadEngine, type Engine, type Generation, type Prepared } from "./llama/engine.ts";
import {
  embeddingsBody,
  errorBody,
  HttpError,
  parseChatRequest,
  parseCompletionRequest,
  parseEmbeddingRequest,
  responseShapes,
  type Sampling,
} from "./llama/openai.ts";
import { AbortedError } from "./llama/pool.ts";

/** Writes one progress/log line to stdout (the supervisor shows it in the dashboard). */
const log = (line: string) => process.stdout.write(`${line}\n`);

/** The runner's state as the HTTP handler sees it. */
export interface RunnerState {
  opts: LlamaRunnerOptions;
  engine?: Engine;
  /** Requests being generated or waiting for a slot. */
  active: number;
}

const json = (body: unknown, status = 200) => Response.json(body, { status });
const fail = (status: number, message: string, type: string) => json(errorBody(status, message, type), status);

/** The model name clients see: --alias, else the model path as given (like llama-server). */
const modelId = (o: LlamaRunnerOptions) => o.alias ?? o.model;

/** Drops the command word (`llama-server` or a path) when the arguments start with one. */
export function runnerArgs(argv: string[]): string[] {
  return argv.length > 0 && !argv[0].startsWith("-") ? argv.slice(1) : argv;
}

/** Builds the fetch handler over the runner state. */
export function createHandler(state: RunnerState) {
  return async (req: Request, server: { timeout(req: Request, seconds: number): void }): Promise<Response> => {
    const url = new URL(req.url).pathname;
    const path = url.replace(/^\/v1(?=\/)/, "");
    const { opts, engine } = state;
    if (path === "/health") {
      return engine
        ? json({ status: "ok", slots_processing: state.active, slots_waiting: engine.waiting() })
        : json({ status: "loading model" }, 503);
    }
    if (opts.apiKey && req.headers.get("authorization") !== `Bearer ${opts.apiKey}`)
      return fail(401, "Invalid API Key", "authentication_error");
    if (!engine) return fail(503, "Loading model", "unavailable_error");
    try {
      if (req.method === "GET" && path === "/models") return json(modelsBody(opts, engine));
      if (req.method !== "POST" || !["/chat/completions", "/completions", "/embeddings"].includes(path))
        return fail(404, "File Not Found", "not_found_error");
      let body: unknown;
      try {
        body = await req.json();
      } catch {
        return fail(400, "the request body is not valid JSON", "invalid_request_error");
      }
      server.timeout(req, 0); // generation may be slower than any idle timeout
      if (path === "/embeddings") {
        const p = parseEmbeddingRequest(body);
        const { vectors, promptTokens } = await engine.embed(p.inputs, req.signal);
        return json(embeddingsBody(modelId(opts), vectors, promptTokens, p.base64));
      }
      const kind = path === "/chat/completions" ? "chat" : "text";
      let params: Sampling;
      let prepared: Prepared;
      if (kind === "chat") {
        const p = parseChatRequest(body);
        [params, prepared] = [p, engine.chat(p)];
      } else {
        const p = parseCompletionRequest(body);
        [params, prepared] = [p, engine.complete(p)];
      }
      return params.stream
        ? stream(state, req, url, kind, prepared, params.includeUsage)
        : await once(state, req, url, kind, prepared);
    } catch (e) {
      if (e instanceof HttpError) return fail(e.status, e.message, e.type);
      if (e instanceof AbortedError) return fail(499, "the client closed the request", "aborted");
      log(`error on ${req.method} ${path}: ${(e as Error)?.stack ?? e}`);
      return fail(500, "internal error while generating", "server_error");
    }
  };
}

function modelsBody(o: LlamaRunnerOptions, engine: Engine) {
  const f = engine.facts;
  // llama-server's meta, plus the backend that really runs (the agent shows it in the replica's row).
  const meta = {
    n_vocab: f.vocabSize,
    n_ctx_train: f.trainContextSize,
    n_ctx: f.contextSize,
    n_embd: f.embeddingLength,
    size: f.sizeBytes,
    backend: f.backend,
  };
  return {
    object: "list",
    data: [{ id: modelId(o), object: "model", created: Math.floor(Date.now() / 1000), owned_by: "llamacpp", meta }],
  };
}

/** Runs a generation while counting it as active, logging its outcome in one line. */
async function tracked(state: RunnerState, path: string, run: () => Promise<Generation>): Promise<Generation> {
  const started = performance.now();
  state.active++;
  try {
    const g = await run();
    const secs = ((performance.now() - started) / 1000).toFixed(2);
    log(
      `POST ${path}: ${g.usage.prompt_tokens} prompt + ${g.usage.completion_tokens} completion tokens in ${secs} s (${g.finish})`,
    );
    return g;
  } catch (e) {
    if (e instanceof AbortedError) log(`POST ${path}: aborted by the client after ${e.tokens} completion tokens`);
    throw e;
  } finally {
    state.active--;
  }
}

async function once(
  state: RunnerState,
  req: Request,
  path: string,
  kind: "chat" | "text",
  prepared: Prepared,
): Promise<Response> {
  const g = await tracked(state, path, () => prepared.run(req.signal));
  const shapes = responseShapes(modelId(state.opts), kind);
  return json(shapes.full(g.text, g.finish, g.usage));
}

/** Streams a generation as SSE `data:` lines ending in `data: [DONE]`; a disconnect aborts it. */
function stream(
  state: RunnerState,
  req: Request,
  path: string,
  kind: "chat" | "text",
  prepared: Prepared,
  includeUsage: boolean,
): Response {
  const shapes = responseShapes(modelId(state.opts), kind);
  const abort = new AbortController();
  req.signal.addEventListener("abort", () => abort.abort(), { once: true });
  const encoder = new TextEncoder();
  const body = new ReadableStream<Uint8Array>({
    async start(controller) {
      const write = (data: string) => {
        if (!abort.signal.aborted) controller.enqueue(encoder.encode(`data: ${data}\n\n`));
      };
      const send = (obj: unknown) => write(JSON.stringify(obj));
      try {
        if (kind === "chat") send(shapes.chunk({ role: "assistant", content: "" }, null));
        const g = await tracked(state, path, () =>
          prepared.run(abort.signal, (text) => text && send(shapes.chunk({ content: text }, null))),
        );
        send(shapes.chunk({}, g.finish));
        if (includeUsage) send(shapes.usageChunk(g.usage));
        write("[DONE]");
      } catch (e) {
        if (!(e instanceof AbortedError)) {
          log(`error while streaming ${path}: ${(e as Error)?.stack ?? e}`);
          send(errorBody(500, "internal error while generating", "server_error"));
        }
      } finally {
        if (!abort.signal.aborted) controller.close();
      }
    },
    cancel() {
      abort.abort();
    },
  });
  return new Response(body, {
    headers: { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" },
  });
}

/** Parses the command line, listens at once (503 on /health while loading), then loads the model. */
export async function main(argv = process.argv.slice(2)): Promise<void> {
  let opts: LlamaRunnerOptions;
  try {
    opts = parseLlamaServerArgs(runnerArgs(argv));
  } catch (e) {
    if (!(e instanceof LlamaArgsError)) throw e;
    log(`error: ${e.message}`);
    process.exit(1);
  }
  for (const flag of opts.ignored) log(`note: ${flag} has no effect in the built-in llama.cpp runtime`);
  const state: RunnerState = { opts, active: 0 };
  const handler = createHandler(state);
  let server: ReturnType<typeof Bun.serve>;
  try {
    server = Bun.serve({
      hostname: opts.host,
      port: opts.port,
      idleTimeout: 255,
      fetch: (req, srv) => handler(req, srv),
    });
  } catch (e) {
    log(`error: cannot listen on ${opts.host}:${opts.port}: ${(e as Error).message}`);
    process.exit(1);
  }
  const origin = `http://${opts.host.includes(":") ? `[${opts.host}]` : opts.host}:${server.port}`;
  log(`main: server is listening on ${origin} - loading model ${opts.model}`);
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log(`received ${signal}, shutting down`);
    server.stop(true);
    const engine = state.engine;
    // A stuck native dispose must not keep the process alive past the supervisor's grace period.
    await Promise.race([engine?.dispose(), Bun.sleep(3000)]).catch(() => {});
    process.exit(0);
  };
  process.on("SIGTERM", () => void stop("SIGTERM"));
  process.on("SIGINT", () => void stop("SIGINT"));

  const started = performance.now();
  try {
    state.engine = await loadEngine(opts, log);
  } catch (e) {
    log(`error: failed to load model ${opts.model}: ${(e as Error)?.message ?? e}`);
    process.exit(1);
  }
  const f = state.engine.facts;
  log(
    `model loaded in ${((performance.now() - started) / 1000).toFixed(2)} s: ${f.embeddingLength}-dim embeddings, ${f.vocabSize} tokens, context ${f.contextSize} per slot (trained ${f.trainContextSize}), chat format ${f.chatWrapper}`,
  );
  log(`main: server is ready on ${origin} (${opts.parallel} slot(s)${opts.embedding ? ", embeddings on" : ""})`);
}

if (import.meta.main) await main();
