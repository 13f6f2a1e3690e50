/**
 * Counting a prompt's tokens with the runtime's own tokenizer, for Anthropic's
 * `POST /v1/messages/count_tokens` and for the `input_tokens` of a translated stream's
 * `message_start`. vLLM's `POST /tokenize` takes the chat messages and applies the chat template;
 * llama-server renders them with `POST /apply-template`, then counts with `POST /tokenize`.
 * Runtimes without a chat-aware tokenizer (SGLang's `/tokenize` takes only a prompt string, Ollama
 * has none) are asked for a one-token chat completion, whose `usage.prompt_tokens` is the count.
 */
import { engineOf } from "../../agent/engines";
import { AppError } from "../errors";
import type { Dispatcher, Target } from "../dispatch/queue";
import { dispatchWith } from "./forward";
import type { JsonObject } from "./anthropic";

/** How a backend counts a chat prompt: its tokenizer routes, or a one-token generation. */
export type CountWay = "vllm" | "llamacpp" | "generate";

/** The way `backend` counts, as its engine descriptor says. */
export const countWayOf = (backend: string): CountWay => engineOf(backend)?.routes(undefined).tokenize ?? "generate";

/** A runtime's error answer, kept to be relayed in the caller's error shape. */
export class RuntimeRefused extends Error {
  constructor(readonly response: Response) {
    super(`the model runtime answered HTTP ${response.status}`);
  }
}

const isObj = (v: unknown): v is JsonObject => typeof v === "object" && v !== null && !Array.isArray(v);

async function post(
  target: Target,
  path: string,
  json: JsonObject,
  signal: AbortSignal,
  headers: Record<string, string>,
): Promise<JsonObject> {
  const r = await target.send(
    { path, method: "POST", headers: { ...headers, "content-type": "application/json" }, body: null, json },
    signal,
  );
  if (!r.ok) throw new RuntimeRefused(r);
  const body: unknown = await r.json().catch(() => undefined);
  if (!isObj(body))
    throw new AppError(502, "upstream_unavailable", `the model runtime's ${path} answer is not a JSON object`);
  return body;
}

const tokensIn = (body: JsonObject, path: string): number => {
  if (typeof body.count === "number") return body.count;
  if (Array.isArray(body.tokens)) return body.tokens.length;
  throw new AppError(502, "upstream_unavailable", `the model runtime's ${path} answer has no token count`);
};

/**
 * The prompt tokens of chat body `chat` on `target`, by its tokenizer (`way` "vllm" or "llamacpp");
 * the runtime's refusal is thrown as `RuntimeRefused`.
 */
export async function tokenizeOn(
  target: Target,
  way: Exclude<CountWay, "generate">,
  chat: JsonObject,
  signal: AbortSignal,
  headers: Record<string, string> = {},
): Promise<number> {
  const asked: JsonObject = { model: chat.model, messages: chat.messages };
  if (chat.tools) asked.tools = chat.tools;
  if (way === "vllm")
    return tokensIn(
      await post(target, "/tokenize", { ...asked, add_generation_prompt: true }, signal, headers),
      "/tokenize",
    );
  const rendered = await post(target, "/apply-template", asked, signal, headers);
  if (typeof rendered.prompt !== "string")
    throw new AppError(502, "upstream_unavailable", "the model runtime's /apply-template answer has no prompt");
  return tokensIn(
    await post(target, "/tokenize", { content: rendered.prompt, add_special: true }, signal, headers),
    "/tokenize",
  );
}

/** The prompt tokens of a one-token chat completion (`usage.prompt_tokens`). */
async function generatedCount(
  target: Target,
  chat: JsonObject,
  signal: AbortSignal,
  headers: Record<string, string>,
): Promise<number> {
  const body = await post(target, "/v1/chat/completions", { ...chat, max_tokens: 1, stream: false }, signal, headers);
  const usage = isObj(body.usage) ? body.usage : {};
  if (typeof usage.prompt_tokens !== "number")
    throw new AppError(502, "upstream_unavailable", "the model runtime's answer has no usage.prompt_tokens");
  return usage.prompt_tokens;
}

/**
 * The prompt tokens of chat body `chat` on a replica of the workload. A count waits in the
 * workload's queue like any request (its wait limit and length apply: 503 / 429) and holds a slot
 * while the runtime tokenizes, so parallel counts are bounded by the replicas' slots as inference
 * is; the slot is given back as soon as the count is known. A runtime without a chat tokenizer, or
 * whose tokenizer routes answer 404, is asked for a one-token generation on the same slot.
 */
export async function countPromptTokens(
  dispatcher: Dispatcher,
  workloadId: string,
  way: CountWay,
  chat: JsonObject,
  signal: AbortSignal,
  headers: Record<string, string> = {},
): Promise<number> {
  let count = 0;
  const got = await dispatchWith(dispatcher, workloadId, signal, async (target, s) => {
    try {
      if (way !== "generate") {
        try {
          count = await tokenizeOn(target, way, chat, s, headers);
          return new Response(null, { status: 204 });
        } catch (e) {
          if (!missingRoute(e)) throw e;
        }
      }
      count = await generatedCount(target, chat, s, headers);
      return new Response(null, { status: 204 });
    } catch (e) {
      if (e instanceof RuntimeRefused) return e.response; // relayed, not a broken runtime
      throw e;
    }
  });
  got.slot.release();
  if (!got.upstream.ok) throw new RuntimeRefused(got.upstream);
  return count;
}

/** True for a runtime's 404 (a build without the route asked for); its body is dropped. */
function missingRoute(e: unknown): boolean {
  if (!(e instanceof RuntimeRefused) || e.response.status !== 404) return false;
  void e.response.body?.cancel().catch(() => {});
  return true;
}
