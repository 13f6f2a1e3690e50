/**
 * The dispatcher's target for an external provider's workload: each request goes to the provider's
 * API with the workload's model and key (never the client's inferd key), through a fetch that
 * judges the provider's address as webhook receivers are judged (https to public addresses unless
 * the operator allows private ones) and connects to exactly the address it checked. The provider's
 * refusals of the operator's key and its failures become inferd's own 502 (the client's key was
 * fine); its 429 passes with its Retry-After; the rest of its answers pass as they are.
 */
import { engineOf } from "../../agent/engines";
import { PROVIDER_CONCURRENCY } from "../../agent/engines/providers";
import { makeResolver } from "../../agent/net/address";
import { guardedFetch } from "../../agent/net/guarded-fetch";
import type { Target, Upstream } from "../dispatch/queue";
import { uploadBytesFor } from "../multipart";

/** What a provider target needs of its workload. */
export interface ProviderWorkload {
  id: string;
  backend: string;
  config: Record<string, unknown>;
}

/** A provider workload's config, as its schema checked it (agent/engines/providers.ts). */
interface ProviderConfig {
  base_url: string;
  model: string;
  max_concurrency?: number;
  timeout_s?: number;
}

/** How long a provider has for one answer unless the workload says (streams included). */
const DEFAULT_TIMEOUT_S = 600;

/** Request headers passed on to a provider: what the body is and what the client accepts. */
const PASSED = ["accept", "content-type", "anthropic-version", "anthropic-beta"];

/** A JSON error in the data plane's shape (`{error:{code, message, type}}`). */
const failure = (status: number, code: string, message: string) =>
  Response.json({ error: { code, message, type: status === 429 ? "rate_limit_error" : "api_error" } }, { status });

/** The provider's own message in its error body, if it has one (OpenAI's and Anthropic's shapes). */
async function providerMessage(r: Response): Promise<string> {
  const text = await r.text().catch(() => "");
  try {
    const body = JSON.parse(text) as { error?: { message?: unknown } | string; message?: unknown };
    const m = typeof body.error === "string" ? body.error : (body.error?.message ?? body.message);
    if (typeof m === "string") return m.slice(0, 500);
  } catch {
    // not JSON: its text
  }
  return text.slice(0, 200) || `HTTP ${r.status}`;
}

/** A provider's answer as inferd passes it on (see the module comment). */
export async function providerAnswer(r: Response, what: string): Promise<Response> {
  if (r.ok) return r;
  if (r.status === 401 || r.status === 403)
    return failure(
      502,
      "provider_refused_key",
      `${what} refused this workload's provider key (HTTP ${r.status}: ${await providerMessage(r)}); the operator sets another with PATCH config.api_key`,
    );
  if (r.status === 429) {
    const answer = failure(429, "provider_rate_limited", `${what} is rate limiting: ${await providerMessage(r)}`);
    const after = r.headers.get("retry-after");
    if (after) answer.headers.set("retry-after", after);
    return answer;
  }
  if (r.status >= 500)
    return failure(502, "upstream_unavailable", `${what} answered ${r.status}: ${await providerMessage(r)}`);
  return r;
}

/** The dispatcher target of a provider's workload, calling it with `key`. */
export function providerTarget(w: ProviderWorkload, key: string, opts: { allowPrivate: boolean }): Target {
  const kind = engineOf(w.backend)?.external ?? "openai";
  const cfg = w.config as unknown as ProviderConfig;
  const base = cfg.base_url.replace(/\/+$/, "");
  const host = new URL(base).host;
  const what = `the provider (${host})`;
  const get = guardedFetch({ allowPrivate: opts.allowPrivate, resolve: makeResolver() }, "the provider's URL");
  const auth: Record<string, string> =
    kind === "anthropic" ? { "x-api-key": key, authorization: `Bearer ${key}` } : { authorization: `Bearer ${key}` };
  return {
    id: `provider:${w.id}`,
    workloadId: w.id,
    workerId: "provider",
    capacity: cfg.max_concurrency ?? PROVIDER_CONCURRENCY,
    inFlight: 0,
    send: async (req: Upstream, signal: AbortSignal) => {
      // OpenAI-style bases end in /v1 (the SDK's baseURL); Anthropic's is the host (its SDK adds /v1).
      const url = kind === "openai" ? base + req.path.replace(/^\/v1(?=\/)/, "") : base + req.path;
      const headers: Record<string, string> = { ...auth };
      for (const h of PASSED) if (req.headers[h]) headers[h] = req.headers[h];
      if (kind === "anthropic") headers["anthropic-version"] ??= "2023-06-01";
      let body = (
        req.body
          ? uploadBytesFor(req, req.body, cfg.model)
          : req.source
            ? uploadBytesFor(req, await req.source.bytes(), cfg.model)
            : null
      ) as BodyInit | null;
      if (req.json) body = JSON.stringify({ ...req.json, model: cfg.model });
      const timeout = AbortSignal.timeout((cfg.timeout_s ?? DEFAULT_TIMEOUT_S) * 1000);
      const r = await get(url, { method: req.method, headers, body, signal: AbortSignal.any([signal, timeout]) });
      return providerAnswer(r, what);
    },
  };
}
