/**
 * The one table of data-plane routes: each inference route a workload or project base serves, the
 * toggle that governs it, how its body is read, the async job kind that runs the same request, and
 * whether a batch may target it. The routes (./routes.ts), the job kinds (../jobs/kinds.ts) and
 * the Batch API's endpoints (../batches/schema.ts) are all read from here, and a request's trace
 * name is its path under `/v1/` (../tracing/timeline.ts `traceName`): adding a route is adding a
 * row. The Ollama API's routes (its own dialect under `…/api/`) are listed here too.
 */
import type { Toggle } from "../workloads/schema";

/** One data-plane route (see the module comment). */
export interface DataRoute {
  /** Its path under a base's `/v1/` (`chat/completions`). */
  path: string;
  /** The workload toggle that switches it on and off. */
  toggle: Toggle;
  /** `json`: a JSON object read and checked; `raw`: an upload streamed on as it arrives. */
  body: "json" | "raw";
  /** How it is answered: forwarded to the runtime's route of the same name, or through a translator. */
  serve: "forward" | "messages" | "count_tokens" | "responses";
  /** The async job kind that runs the same request (`POST …/jobs`), and other names it answers to. */
  kind?: string;
  aliases?: string[];
  /** Whether an OpenAI batch may target it (`endpoint: "/v1/<path>"`). */
  batch?: true;
}

/** Every route under `/v1/` of a workload's or a project's base URL. */
export const DATA_ROUTES: readonly DataRoute[] = [
  {
    path: "chat/completions",
    toggle: "chat",
    body: "json",
    serve: "forward",
    kind: "chat",
    aliases: ["chat_completions"],
    batch: true,
  },
  { path: "completions", toggle: "chat", body: "json", serve: "forward", kind: "completions", batch: true },
  { path: "embeddings", toggle: "embeddings", body: "json", serve: "forward", kind: "embeddings", batch: true },
  { path: "rerank", toggle: "rerank", body: "json", serve: "forward", kind: "rerank", aliases: ["reranking"] },
  { path: "audio/speech", toggle: "audio", body: "json", serve: "forward", kind: "audio_speech" },
  { path: "audio/generate", toggle: "audio", body: "json", serve: "forward", kind: "audio_generate" },
  { path: "audio/transcriptions", toggle: "audio", body: "raw", serve: "forward", kind: "audio_transcriptions" },
  {
    path: "images/generations",
    toggle: "images",
    body: "json",
    serve: "forward",
    kind: "images",
    aliases: ["images_generations"],
  },
  { path: "images/edits", toggle: "images", body: "raw", serve: "forward", kind: "images_edits" },
  { path: "images/variations", toggle: "images", body: "raw", serve: "forward", kind: "images_variations" },
  { path: "forecast", toggle: "forecast", body: "json", serve: "forward", kind: "forecast" },
  { path: "messages", toggle: "chat", body: "json", serve: "messages" },
  { path: "messages/count_tokens", toggle: "chat", body: "json", serve: "count_tokens" },
  { path: "responses", toggle: "chat", body: "json", serve: "responses" },
];

/** The Ollama API's routes under both bases (`…/api/<name>`), answered by ./ollama.ts, and their methods. */
export const OLLAMA_ROUTES = [
  { name: "chat", method: "POST" },
  { name: "generate", method: "POST" },
  { name: "embed", method: "POST" },
  { name: "embeddings", method: "POST" },
  { name: "show", method: "POST" },
  { name: "tags", method: "GET" },
  { name: "ps", method: "GET" },
  { name: "version", method: "GET" },
] as const;

/** An Ollama API route's name. */
export type OllamaRouteName = (typeof OLLAMA_ROUTES)[number]["name"];

/** The routes forwarded as they are to the runtime's route of the same name. */
export const FORWARDED_ROUTES: readonly DataRoute[] = DATA_ROUTES.filter((r) => r.serve === "forward");

/** The row of a path under `/v1/`. */
export const dataRoute = (path: string): DataRoute | undefined => DATA_ROUTES.find((r) => r.path === path);
