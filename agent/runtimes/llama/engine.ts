/**
 * The model behind the built-in llama.cpp runtime: one node-llama-cpp model, one context with a
 * sequence per `-np` slot handed out by a SlotPool, and an embedding context when `--embedding`.
 */
import type * as Nlc from "node-llama-cpp";
import type { LlamaRunnerOptions } from "../llama-runner-args.ts";
import { importNodeLlamaCpp, startLlama, type NodeLlamaCpp } from "./nlc.ts";
import {
  badRequest,
  finishReason,
  HttpError,
  notSupported,
  type ChatParams,
  type CompletionParams,
  type Sampling,
  type Usage,
} from "./openai.ts";
import { AbortedError, SlotPool } from "./pool.ts";

/** The result of one generation. */
export interface Generation {
  text: string;
  finish: "stop" | "length";
  usage: Usage;
}

/** Facts about the loaded model, for logs and /v1/models. */
export interface ModelFacts {
  backend: string;
  threads: number;
  trainContextSize: number;
  contextSize: number;
  embeddingLength: number;
  vocabSize: number;
  sizeBytes: number;
  chatWrapper: string;
}

/** A checked request: its prompt size, and the generation to run on a free slot. */
export interface Prepared {
  promptTokens: number;
  run(signal: AbortSignal, onText?: (text: string) => void): Promise<Generation>;
}

/** A loaded model ready to serve. */
export interface Engine {
  facts: ModelFacts;
  /** Requests waiting for a free slot. */
  waiting(): number;
  /** Checks a chat request against the context (throws HttpError) and returns how to run it. */
  chat(p: ChatParams): Prepared;
  /** Same for a text completion. */
  complete(p: CompletionParams): Prepared;
  embed(inputs: (string | number[])[], signal: AbortSignal): Promise<{ vectors: number[][]; promptTokens: number }>;
  dispose(): Promise<void>;
}

/** llama-server's default sampling, used where neither the request nor the command sets one. */
const SERVER_DEFAULTS = { temperature: 0.8, topK: 40, topP: 0.95, minP: 0.05 };

/**
 * Loads the model named by the options and creates its contexts, reporting progress through `log`.
 * Never downloads or compiles: see startLlama.
 */
export async function loadEngine(
  o: LlamaRunnerOptions,
  log: (line: string) => void,
  nlcIn?: NodeLlamaCpp,
): Promise<Engine> {
  const nlc = nlcIn ?? (await importNodeLlamaCpp());
  const { llama, backend } = await startLlama(nlc, {
    gpu: o.gpuLayers !== 0,
    maxThreads: o.threads,
    verbose: o.verbose,
    log,
  });
  // On CPU, more threads than math cores makes ggml's workers spin against each other.
  const threads = o.threads ?? Math.max(1, llama.cpuMathCores);
  log(`llama.cpp backend: ${backend}; ${llama.buildType} binaries, ${threads} thread(s)`);

  let lastStep = -1;
  const model = await llama.loadModel({
    modelPath: o.model,
    gpuLayers: llama.gpu === false ? 0 : o.gpuLayers,
    useMmap: o.noMmap ? false : undefined,
    defaultContextFlashAttention: o.flashAttention,
    onLoadProgress: (p) => {
      const step = Math.floor(p * 10);
      if (step > lastStep) log(`loading model: ${step * 10}%`);
      lastStep = step;
    },
  });
  // llama-server splits -c between the -np slots; node-llama-cpp sizes each sequence.
  const total = o.ctxSize === undefined ? Math.min(4096, model.trainContextSize) : o.ctxSize || model.trainContextSize;
  const contextSize = Math.max(64, Math.floor(total / o.parallel));
  log(`creating context: ${o.parallel} slot(s) x ${contextSize} tokens`);
  const context = await model.createContext({
    contextSize,
    sequences: o.parallel,
    threads,
    batchSize: o.batchSize,
    flashAttention: o.flashAttention,
  });
  const embedContext = o.embedding
    ? await model.createEmbeddingContext({ contextSize, batchSize: contextSize, threads })
    : undefined;
  return new LlamaEngine(nlc, { llama, model, context, embedContext }, o, backend, threads);
}

/** The node-llama-cpp objects an engine owns. */
interface Parts {
  llama: Nlc.Llama;
  model: Nlc.LlamaModel;
  context: Nlc.LlamaContext;
  embedContext?: Nlc.LlamaEmbeddingContext;
}

/** Options node-llama-cpp's generate calls take, as this engine fills them in. */
type GenerateOptions = ReturnType<LlamaEngine["generationOptions"]> & {
  signal: AbortSignal;
  stopOnAbortSignal: false;
  onTextChunk?: (text: string) => void;
  onToken: (tokens: Nlc.Token[]) => void;
};

class LlamaEngine implements Engine {
  readonly facts: ModelFacts;
  private readonly pool: SlotPool<Nlc.LlamaContextSequence>;
  private readonly embedPool = new SlotPool([0]);
  private readonly chatWrapper: Nlc.ChatWrapper;

  constructor(
    private readonly nlc: NodeLlamaCpp,
    private readonly p: Parts,
    private readonly o: LlamaRunnerOptions,
    backend: string,
    threads: number,
  ) {
    this.pool = new SlotPool(Array.from({ length: o.parallel }, () => p.context.getSequence()));
    this.chatWrapper = nlc.resolveChatWrapper(p.model);
    let vocabSize = 0;
    for (const _ of p.model.iterateAllTokens()) vocabSize++;
    this.facts = {
      backend,
      threads,
      trainContextSize: p.model.trainContextSize,
      contextSize: p.context.contextSize,
      embeddingLength: p.model.embeddingVectorSize,
      vocabSize,
      sizeBytes: p.model.size,
      chatWrapper: this.chatWrapper.wrapperName,
    };
  }

  waiting(): number {
    return this.pool.waiting;
  }

  chat(params: ChatParams): Prepared {
    const history = toHistory(params.messages);
    const promptTokens = this.chatWrapper
      .generateContextState({ chatHistory: history })
      .contextText.tokenize(this.p.model.tokenizer).length;
    return this.prepare(params, promptTokens, async (seq, options) => {
      const chat = new this.nlc.LlamaChat({
        contextSequence: seq,
        chatWrapper: this.chatWrapper,
        autoDisposeSequence: false,
      });
      try {
        return await chat.generateResponse(history, options);
      } finally {
        chat.dispose({ disposeSequence: false });
      }
    });
  }

  complete(params: CompletionParams): Prepared {
    const { model } = this.p;
    const promptTokens = model.tokenize(params.prompt, false).length + (model.tokens.shouldPrependBosToken ? 1 : 0);
    return this.prepare(params, promptTokens, async (seq, options) => {
      const completion = new this.nlc.LlamaCompletion({ contextSequence: seq, autoDisposeSequence: false });
      try {
        return await completion.generateCompletionWithMeta(params.prompt, options);
      } finally {
        completion.dispose({ disposeSequence: false });
      }
    });
  }

  async embed(
    inputs: (string | number[])[],
    signal: AbortSignal,
  ): Promise<{ vectors: number[][]; promptTokens: number }> {
    const ctx = this.p.embedContext;
    if (!ctx) throw notSupported("This server does not support embeddings. Start it with `--embeddings`");
    const { vocabSize, contextSize } = this.facts;
    const lengths = inputs.map((input) => {
      if (typeof input !== "string" && input.some((t) => t >= vocabSize))
        throw badRequest(`token ids must be below the vocabulary size ${vocabSize}`);
      const length = ctx.calculateInputLength(input as Nlc.Token[] | string);
      if (length > contextSize)
        throw badRequest(`input is too large to process (${length} tokens, the context holds ${contextSize})`);
      return length;
    });
    const slot = await this.embedPool.acquire(signal);
    try {
      const vectors: number[][] = [];
      for (const input of inputs) {
        if (signal.aborted) throw new AbortedError();
        vectors.push(normalize((await ctx.getEmbeddingFor(input as Nlc.Token[] | string)).vector));
      }
      return { vectors, promptTokens: lengths.reduce((a, b) => a + b, 0) };
    } finally {
      this.embedPool.release(slot);
    }
  }

  async dispose(): Promise<void> {
    await this.p.embedContext?.dispose();
    await this.p.context.dispose();
    await this.p.model.dispose();
    await this.p.llama.dispose();
  }

  /** Sampling options for node-llama-cpp and the token budget left after the prompt; 400 when the prompt does not fit. */
  private generationOptions(s: Sampling, promptTokens: number) {
    const { contextSize } = this.facts;
    if (promptTokens >= contextSize) {
      throw new HttpError(
        400,
        "exceed_context_size_error",
        `the request (${promptTokens} prompt tokens) exceeds the available context size (${contextSize} tokens), try increasing it`,
      );
    }
    const o = this.o;
    const requested = s.maxTokens ?? (o.nPredict >= 0 ? o.nPredict : -1);
    const room = contextSize - promptTokens;
    return {
      maxTokens: requested < 0 ? room : Math.min(requested, room),
      temperature: s.temperature ?? o.temperature ?? SERVER_DEFAULTS.temperature,
      topK: s.topK ?? o.topK ?? SERVER_DEFAULTS.topK,
      topP: s.topP ?? o.topP ?? SERVER_DEFAULTS.topP,
      minP: s.minP ?? o.minP ?? SERVER_DEFAULTS.minP,
      seed: s.seed ?? o.seed,
      customStopTriggers: s.stop.length ? s.stop : undefined,
    };
  }

  /** Checks the request now; its run takes a free sequence, counts tokens and turns an abort into AbortedError. */
  private prepare(
    s: Sampling,
    promptTokens: number,
    generate: (
      seq: Nlc.LlamaContextSequence,
      options: GenerateOptions,
    ) => Promise<{ response: string; metadata: { stopReason: string } }>,
  ): Prepared {
    const gen = this.generationOptions(s, promptTokens);
    const usage = (completion: number): Usage => ({
      prompt_tokens: promptTokens,
      completion_tokens: completion,
      total_tokens: promptTokens + completion,
    });
    const run = async (signal: AbortSignal, onText?: (text: string) => void): Promise<Generation> => {
      if (gen.maxTokens === 0) return { text: "", finish: "length", usage: usage(0) };
      const seq = await this.pool.acquire(signal);
      let count = 0;
      try {
        const r = await generate(seq, {
          ...gen,
          signal,
          stopOnAbortSignal: false,
          onTextChunk: onText,
          onToken: (t) => (count += t.length),
        });
        if (signal.aborted) throw new AbortedError(count);
        const finish = finishReason(r.metadata.stopReason);
        // Ended by the token limit, it generated exactly that many: node-llama-cpp may hold the last
        // tokens back (a possible stop or function-call prefix) without passing them to onToken.
        return { text: r.response, finish, usage: usage(finish === "length" ? Math.max(count, gen.maxTokens) : count) };
      } catch (e) {
        throw signal.aborted && !(e instanceof AbortedError) ? new AbortedError(count) : e;
      } finally {
        this.pool.release(seq);
      }
    };
    return { promptTokens, run };
  }
}

/** OpenAI messages as node-llama-cpp chat history ending in the model turn to generate. */
function toHistory(messages: ChatParams["messages"]): Nlc.ChatHistoryItem[] {
  const history: Nlc.ChatHistoryItem[] = messages.map((m) =>
    m.role === "system"
      ? { type: "system", text: m.content }
      : m.role === "user"
        ? { type: "user", text: m.content }
        : { type: "model", response: [m.content] },
  );
  // A trailing assistant message is a prefix to continue, as llama-server treats it.
  if (messages[messages.length - 1].role !== "assistant") history.push({ type: "model", response: [] });
  return history;
}

/** L2-normalised copy of a vector (llama-server's default for /v1/embeddings). */
function normalize(v: readonly number[]): number[] {
  const norm = Math.sqrt(v.reduce((s, x) => s + x * x, 0));
  return norm > 0 ? v.map((x) => x / norm) : [...v];
}
