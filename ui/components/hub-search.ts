/**
 * Finding a model by name: a search box asking `GET /admin/models/search` (the Hugging Face hub,
 * or the Ollama library), listing each hit's quantisations with size and whether it fits on this
 * cluster's GPUs, and one click per quantisation: Pull (the Models page), Use (a model field), or
 * Serve for an Ollama model (its daemon pulls it).
 */
import { html } from "htm/preact";
import { useState } from "preact/hooks";
import { api } from "../lib/api";
import { useAction, useDebouncedApi } from "../lib/hooks";
import { bytes, count } from "../lib/format";
import { sameRef } from "../lib/model-ref";
import type { Model } from "../lib/types";
import type { SearchAnswer, SearchBackend, SearchFit, SearchHit, SearchOffer } from "../../src/models/search";
import { ErrorNote, StateBadge } from "./ui";
import { ServeButton } from "./model-card";

/** Where a search looks, as the Models page offers it. */
const PLACES: [SearchBackend, string][] = [
  ["llamacpp", "Hugging Face: GGUF (llama.cpp)"],
  ["vllm", "Hugging Face: safetensors (vLLM, SGLang)"],
  ["ollama", "Ollama library"],
];

/** Shortest query sent: one letter matches half the hub. */
const MIN_QUERY = 2;

const FIT_TEXT: Record<SearchFit["verdict"], [string, string]> = {
  gpu: ["fits on GPU", "state-ready"],
  ram: ["CPU only: fits in RAM", "state-downloading"],
  too_big: ["too big here", "state-failed"],
  unknown: ["fit unknown", "state-cancelled"],
};

/** The fit of an offer: a badge, and where (or how much it needs). */
function Fit({ fit }: { fit: SearchFit }) {
  const [text, cls] = FIT_TEXT[fit.verdict];
  const need = fit.needs_mib === null ? "" : `needs ≥ ${(fit.needs_mib / 1024).toFixed(1)} GiB`;
  return html`<span class=${`badge ${cls}`} data-testid="fit-verdict">${text}</span>
    <span class="muted small-text">${[need, fit.where].filter(Boolean).join(" · ")}</span>`;
}

/** What a click on an offer does: pull it, put it in a model field, or serve it (Ollama). */
export type SearchAction =
  | { kind: "pull"; onPulled(): unknown; project?: string }
  | { kind: "use"; onUse(ref: string): void };

/** The llama.cpp reference of an hf source (`hf:o/r:Q4_K_M` → `o/r:Q4_K_M`; a file keeps `hf:`). */
const refOfSource = (source: string) => (/^hf:[^/]+\/[^/:]+:[^/]+$/.test(source) ? source.slice(3) : source);

/** One offer's row: label, size, fit and its button (or the state of the model already in the store). */
function Offer({
  hit,
  offer,
  backend,
  action,
  models,
}: {
  hit: SearchHit;
  offer: SearchOffer;
  backend: SearchBackend;
  action: SearchAction;
  models: Model[];
}) {
  const pull = useAction((source: string) =>
    api<Model>("/admin/models", {
      body: { source, ...(action.kind === "pull" && action.project ? { project: action.project } : {}) },
    }),
  );
  const have = models.find((m) => sameRef(m.source, offer.source));
  const size =
    offer.size_bytes === null
      ? "size unknown"
      : `${offer.estimated ? "~" : ""}${bytes(offer.size_bytes)}${offer.files > 1 ? ` in ${offer.files} files` : ""}${
          offer.projector_bytes !== null ? `, with its vision projector (${bytes(offer.projector_bytes)})` : ""
        }`;
  const name = `${hit.id} ${offer.label}`;
  const button = (() => {
    if (backend === "ollama")
      return html`<${ServeButton} model=${offer.source} backend="ollama" label="Serve" name=${`Serve ${offer.source}`} small=${true} />`;
    if (action.kind === "use")
      return html`<button type="button" class="small" aria-label=${`Use ${name}`} onClick=${() => action.onUse(refOfSource(offer.source))}>Use</button>`;
    if (have && have.state !== "failed" && have.state !== "cancelled")
      return html`<${StateBadge} state=${have.state} />`;
    return html`<button type="button" class="small primary" aria-label=${`Pull ${name}`} disabled=${pull.busy}
      onClick=${async () => (await pull.run(offer.source)) && action.onPulled()}>Pull</button>`;
  })();
  return html`<li class="offer" aria-label=${`Quant ${name}`}>
    <code class="offer-label">${offer.label}</code>
    <span class="offer-size">${size}</span>
    <span class="offer-fit"><${Fit} fit=${offer.fit} /></span>
    <span class="offer-action">${button}</span>
    ${pull.error ? html`<div class="offer-error"><${ErrorNote} error=${pull.error} /></div>` : null}
  </li>`;
}

/** One hit: its name (a link to its page), counts, gated or not, and its offers. */
function Hit({
  hit,
  backend,
  action,
  models,
}: {
  hit: SearchHit;
  backend: SearchBackend;
  action: SearchAction;
  models: Model[];
}) {
  const counts = [
    hit.downloads === null ? null : `${count(hit.downloads)} downloads`,
    hit.likes === null ? null : `${count(hit.likes)} likes`,
  ]
    .filter(Boolean)
    .join(" · ");
  return html`<li class="card hit" aria-label=${`Hit ${hit.id}`}>
    <div class="hit-head"><a class="wrap" href=${hit.url} target="_blank" rel="noreferrer">${hit.id}</a>
      ${hit.gated ? html`<span class="badge state-downloading" title="Pulling needs HF_TOKEN of an account that accepted its terms">gated</span>` : null}
      ${counts ? html`<span class="muted small-text">${counts}</span>` : null}</div>
    ${hit.description ? html`<p class="muted small-text wrap">${hit.description}</p>` : null}
    ${hit.note ? html`<p class="reason reason-quiet">${hit.note}</p>` : null}
    ${hit.offers.length ? html`<ul class="offers">${hit.offers.map((o) => html`<${Offer} key=${o.source} hit=${hit} offer=${o} backend=${backend} action=${action} models=${models} />`)}</ul>` : null}
  </li>`;
}

/**
 * The search box and its hits. `backend` fixes where it looks (a llama.cpp model field); without
 * it the user chooses (the Models page). `models` are the store's, to show what is already pulled.
 */
export function HubSearch({
  backend: fixed,
  action,
  models,
}: {
  backend?: SearchBackend;
  action: SearchAction;
  models: Model[];
}) {
  const [q, setQ] = useState("");
  const [place, setPlace] = useState<SearchBackend>(fixed ?? "llamacpp");
  const backend = fixed ?? place;
  const query = q.trim();
  const path =
    query.length >= MIN_QUERY ? `/admin/models/search?q=${encodeURIComponent(query)}&backend=${backend}` : null;
  const { data, error } = useDebouncedApi<SearchAnswer>(path, {}, `${backend} ${query}`);
  const current = data && data.query === query && data.backend === backend ? data : undefined;
  const where = backend === "ollama" ? "the Ollama library" : "Hugging Face";
  const status = !path
    ? ""
    : error
      ? ""
      : !current
        ? "Searching…"
        : current.hits.length
          ? `${current.hits.length} found on ${where} for “${query}”`
          : `Nothing on ${where} matches “${query}”.`;
  return html`<div class="hub-search">
    <div class="search-row">
      <label class="search-q">Search models by name
        <input type="search" name="q" value=${q} spellcheck=${false} autocomplete="off" placeholder=${backend === "ollama" ? "qwen2.5" : "qwen2.5 0.5b"}
          onInput=${(e: Event) => setQ((e.target as HTMLInputElement).value)} /></label>
      ${
        fixed
          ? null
          : html`<label class="search-place">Look in
        <select value=${place} onChange=${(e: Event) => setPlace((e.target as HTMLSelectElement).value as SearchBackend)}>
          ${PLACES.map(([v, text]) => html`<option value=${v}>${text}</option>`)}</select></label>`
      }
    </div>
    <p class="muted small-text" aria-live="polite" data-testid="search-status">${status}</p>
    ${error && path ? html`<${ErrorNote} error=${error} />` : null}
    ${current?.hits.length ? html`<ul class="hits">${current.hits.map((h) => html`<${Hit} key=${h.id} hit=${h} backend=${backend} action=${action} models=${models} />`)}</ul>` : null}
  </div>`;
}

/** A llama.cpp model field's Hugging Face repo and quantisation (`owner/repo:Q4_K_M`, `hf:owner/repo`), or undefined for a path, URL or file. */
export function hubRepoOf(ref: string): { repo: string; quant?: string } | undefined {
  const m = /^(?:hf:)?([A-Za-z0-9][\w.-]*\/[\w.-]+)(?::([A-Za-z0-9][\w.-]*))?$/.exec(ref.trim());
  return m ? { repo: m[1], quant: m[2] } : undefined;
}

/**
 * What the hub says of a llama.cpp model field's repo before the form saves it, through the same
 * search the dashboard offers: a message when the hub has no GGUF repo of that id, or the repo has
 * no such quantisation; undefined when it has them, or when the hub cannot tell (offline, out of
 * reach, too many similar names to be sure).
 * @example await hubRefProblem("nobody/Nothing-GGUF:Q4_K_M") // → 'Hugging Face has no GGUF model "nobody/Nothing-GGUF"…'
 */
export async function hubRefProblem(ref: string): Promise<string | undefined> {
  const asked = hubRepoOf(ref);
  if (!asked) return undefined;
  let found: SearchAnswer;
  try {
    found = await api<SearchAnswer>(`/admin/models/search?q=${encodeURIComponent(asked.repo)}&backend=llamacpp`);
  } catch {
    return undefined;
  }
  const hit = found.hits.find((h) => h.id.toLowerCase() === asked.repo.toLowerCase());
  if (!hit)
    return found.hits.length >= 8
      ? undefined
      : `Hugging Face has no GGUF model "${asked.repo}": check the owner and name (search for it above), or give a GGUF file's path.`;
  const labels = hit.offers.map((o) => o.label);
  if (!asked.quant || !labels.length || labels.some((l) => l.toLowerCase() === asked.quant!.toLowerCase()))
    return undefined;
  return `"${hit.id}" has no ${asked.quant} quantisation; it has ${labels.join(", ")}.`;
}
