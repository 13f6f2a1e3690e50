/**
 * External AI providers: workloads that forward to a hosted API instead of running a model here —
 * any OpenAI-compatible service (OpenAI, OpenRouter, a vLLM elsewhere) and Anthropic's API. Nothing
 * is launched and no worker is placed: the host calls the provider itself (src/providers/), with the
 * provider key the operator gave, kept encrypted. Only the operator may create one (a tenant could
 * otherwise spend the operator's key). The fakes that stand for the APIs are
 * test/fixtures/providers.ts (OpenAI's and Anthropic's published HTTP APIs, over HTTPS).
 */
import { z } from "zod";
import type { Engine } from "./types";

/** The config fields of a provider's workload. `api_key` is write-only: taken out and kept sealed. */
const PROVIDER_FIELDS = {
  base_url: z.string().trim().max(2048).url("must be the provider's base URL, such as https://api.openai.com/v1"),
  model: z.string().trim().min(1).max(500),
  api_key: z.string().min(1).max(4096).optional(),
  max_concurrency: z.number().int().min(1).max(1000).optional(),
  timeout_s: z.number().int().min(1).max(3600).optional(),
};

/** Requests a provider's workload sends at once unless it says (the contract's default concurrency). */
export const PROVIDER_CONCURRENCY = 20;

/** The shared part of the provider descriptors. */
const provider = {
  probe: { argv: [], version: () => undefined },
  family: null,
  needsGpu: false,
  programs: [],
  flags: { tensorParallel: [], servedName: [], model: [], apiKey: [] },
  config: PROVIDER_FIELDS,
  apiKeyOf: () => undefined,
  readiness: () => [],
  capacity: () => ({ slots: PROVIDER_CONCURRENCY, why: "the workload's config.max_concurrency, else 20" }),
  toolsOn: () => true,
  launch: () => {
    throw new Error("an external provider's workload is served by the host, never launched");
  },
  fake: "test/fixtures/providers.ts",
} satisfies Partial<Engine>;

/** Any OpenAI-compatible API: `base_url` as the OpenAI SDK takes it (`…/v1`). It speaks no Messages: 501 there. */
export const openaiProvider: Engine = {
  ...provider,
  backend: "openai-compatible",
  label: "OpenAI-compatible API",
  install: "nothing to install: the provider's base URL, model and API key",
  external: "openai",
  routes: () => ({ messages: false, responses: undefined, tokenize: "generate" }),
};

/** Anthropic's API: `base_url` as the Anthropic SDK takes it (`https://api.anthropic.com`). */
export const anthropicProvider: Engine = {
  ...provider,
  backend: "anthropic",
  label: "Anthropic API",
  install: "nothing to install: the base URL, model and API key",
  external: "anthropic",
  routes: () => ({ messages: true, responses: false, tokenize: "generate" }),
};
