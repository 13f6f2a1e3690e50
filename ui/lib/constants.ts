/** The admin API's choices, with the words the dashboard shows for them (the server checks them). */
import { ENGINE_FACES } from "inferd:engines";
import { llamaModelArgs } from "./model-ref";

/** Backends, in the order the form offers them: from the engines' descriptors (agent/engines), embedded when the dashboard is bundled. */
export const BACKENDS = ENGINE_FACES;

/** A backend id (the server checks it). */
export type Backend = string;

/** Task types with their labels. */
export const TASK_TYPES: [string, string][] = [
  ["text2text", "Chat / text generation"],
  ["embedding", "Embeddings"],
  ["image2text", "Vision chat"],
  ["text2image", "Image generation"],
  ["image2image", "Image editing"],
  ["text2audio", "Speech / audio generation"],
  ["audio2text", "Transcription"],
  ["text2video", "Video generation"],
  ["reranker", "Reranking (jobs only)"],
  ["classification", "Classification (jobs only)"],
  ["reward", "Reward model (jobs only)"],
  ["forecast", "Time-series forecasting"],
];

/** Endpoint toggles with what each switches. */
export const TOGGLES: [string, string][] = [
  ["chat", "Chat completions and Messages"],
  ["embeddings", "Embeddings"],
  ["rerank", "Rerank"],
  ["audio", "Audio (speech, transcription)"],
  ["images", "Images"],
  ["forecast", "Forecast"],
  ["jobs", "Async jobs (and their webhook deliveries)"],
];

/**
 * The endpoint switches each task type uses (async jobs apply to all), per the data plane's routes:
 * chat serves text and vision chat, `images` generation and editing, `audio` speech and transcription.
 * The rest of the switches are folded away on the workload page.
 */
export const TASK_TOGGLES: Record<string, string[]> = {
  text2text: ["chat"],
  image2text: ["chat"],
  embedding: ["embeddings"],
  reranker: ["rerank"],
  text2image: ["images"],
  image2image: ["images"],
  text2video: ["images"],
  text2audio: ["audio"],
  audio2text: ["audio"],
  forecast: ["forecast"],
  classification: [],
  reward: [],
};

/** Task types the playground can try (chat and completions, embeddings, rerank). */
export const PLAYGROUND_TASKS = new Set(["text2text", "image2text", "embedding", "reranker"]);

/** The command a backend starts from, before the user edits it; `ref` is a llama.cpp model reference. */
export function defaultCommand(backend: string, model: string, ref = ""): string {
  const template = BACKENDS.find((b) => b.id === backend)?.command ?? "";
  return template.replace("{model}", model.trim() || "<model>").replace("{gguf}", llamaModelArgs(ref));
}
