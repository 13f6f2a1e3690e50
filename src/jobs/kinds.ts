import type { Toggle } from "../workloads/schema";

/** What a job kind runs: the synchronous route it equals and the toggle that governs it. */
export interface KindSpec {
  route: string;
  toggle: Toggle;
}

/** Job kinds and the synchronous route each equals (the contract's table). */
export const KINDS: Record<string, KindSpec> = {
  chat: { route: "chat/completions", toggle: "chat" },
  completions: { route: "completions", toggle: "chat" },
  embeddings: { route: "embeddings", toggle: "embeddings" },
  rerank: { route: "rerank", toggle: "rerank" },
  audio_speech: { route: "audio/speech", toggle: "audio" },
  audio_generate: { route: "audio/generate", toggle: "audio" },
  audio_transcriptions: { route: "audio/transcriptions", toggle: "audio" },
  images: { route: "images/generations", toggle: "images" },
  images_edits: { route: "images/edits", toggle: "images" },
  images_variations: { route: "images/variations", toggle: "images" },
  forecast: { route: "forecast", toggle: "forecast" },
};

/** Other names accepted for a kind. */
export const ALIASES: Record<string, string> = {
  chat_completions: "chat",
  reranking: "rerank",
  images_generations: "images",
};

/** Every accepted kind name, aliases included, for error messages. */
export const ACCEPTED_KINDS = [...Object.keys(KINDS), ...Object.keys(ALIASES)];

/** The canonical kind for a name, or undefined. */
export const canonicalKind = (name: string): string | undefined => (KINDS[name] ? name : ALIASES[name]);
