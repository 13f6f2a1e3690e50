/** The playgrounds of embeddings workloads (texts → vectors, similarity) and rerank workloads (query + documents → ranked scores). */
import { html } from "htm/preact";
import { useState } from "preact/hooks";
import { answer } from "../lib/api";
import { plural } from "../lib/format";
import { useAction } from "../lib/hooks";
import type { Workload } from "../lib/types";
import { ErrorNote, RequestId } from "./ui";

/** The lines of a textarea that have text. */
const lines = (text: string) =>
  text
    .split("\n")
    .map((l) => l.trim())
    .filter(Boolean);

/**
 * The cosine similarity of two vectors.
 * @example cosine([1, 0], [0, 1]) // → 0
 */
export function cosine(a: number[], b: number[]): number {
  let dot = 0,
    na = 0,
    nb = 0;
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    dot += a[i] * b[i];
    na += a[i] * a[i];
    nb += b[i] * b[i];
  }
  return na && nb ? dot / Math.sqrt(na * nb) : 0;
}

type Embedded = { data: { index: number; embedding: number[] }[]; usage?: { prompt_tokens?: number } };

/** The similarity of every pair of texts, as a table. */
function Similarity({ texts, vectors }: { texts: string[]; vectors: number[][] }) {
  const n = Math.min(vectors.length, 8);
  if (n < 2) return null;
  return html`<h3 id="sim-h">Cosine similarity</h3><div class="table-wrap"><table aria-labelledby="sim-h">
    <thead><tr><th scope="col"></th>${texts.slice(0, n).map((_, j) => html`<th scope="col">#${j + 1}</th>`)}</tr></thead>
    <tbody>${texts.slice(0, n).map((_, i) => html`<tr><th scope="row">#${i + 1}</th>${texts.slice(0, n).map((_, j) => html`<td>${cosine(vectors[i], vectors[j]).toFixed(3)}</td>`)}</tr>`)}</tbody>
  </table></div>`;
}

/** Texts in, one vector each: dimensions, a preview of each vector, and how similar the texts are. */
export function EmbeddingsPlayground({ w }: { w: Workload }) {
  const [text, setText] = useState("The cat sat on the mat.\nA dog slept on the rug.");
  const [out, setOut] = useState<{ texts: string[]; vectors: number[][]; tokens?: number; requestId?: string }>();
  const embed = useAction((texts: string[]) =>
    answer<Embedded>(`/admin/workloads/${w.id}/embeddings`, { body: { input: texts } }),
  );
  const submit = async (e: Event) => {
    e.preventDefault();
    const texts = lines(text);
    const r = await embed.run(texts);
    if (r)
      setOut({
        texts,
        vectors: [...r.data.data].sort((a, b) => a.index - b.index).map((d) => d.embedding),
        tokens: r.data.usage?.prompt_tokens,
        requestId: r.requestId,
      });
  };
  const dims = out?.vectors[0]?.length ?? 0;
  return html`<form class="form card" onSubmit=${submit} aria-label="Embed texts">
      <label>Texts, one per line<textarea name="texts" rows="4" value=${text} onInput=${(e: Event) => setText((e.target as HTMLTextAreaElement).value)}></textarea></label>
      <${ErrorNote} error=${embed.error} />
      <div class="actions"><button type="submit" class="primary" disabled=${embed.busy || !lines(text).length}>Embed</button></div>
    </form>
    ${
      out
        ? html`<section aria-labelledby="emb-h"><h2 id="emb-h">Vectors</h2>
      <p role="status" data-testid="embed-summary">${plural(out.vectors.length, "vector")} · ${plural(dims, "dimension")}${out.tokens ? ` · ${plural(out.tokens, "token")}` : ""}</p>
      ${out.requestId ? html`<${RequestId} id=${out.requestId} inspect />` : null}
      <div class="table-wrap"><table aria-label="Vectors"><thead><tr><th scope="col">#</th><th scope="col">Text</th><th scope="col">First values</th></tr></thead>
        <tbody>${out.vectors.map(
          (v, i) =>
            html`<tr><td>${i + 1}</td><td class="doc-text">${out.texts[i]}</td><td><code class="vector">[${v
              .slice(0, 6)
              .map((x) => x.toFixed(4))
              .join(", ")}${v.length > 6 ? ", …" : ""}]</code></td></tr>`,
        )}</tbody>
      </table></div>
      <${Similarity} texts=${out.texts} vectors=${out.vectors} />
    </section>`
        : null
    }`;
}

type Ranked = { results: { index: number; relevance_score: number }[] };

/** A query and documents in, the documents ranked by the model's relevance score. */
export function RerankPlayground({ w }: { w: Workload }) {
  const [query, setQuery] = useState("Where do cats sleep?");
  const [docs, setDocs] = useState("Cats sleep on warm mats.\nThe stock market fell today.\nDogs like long walks.");
  const [out, setOut] = useState<{ docs: string[]; results: Ranked["results"]; requestId?: string }>();
  const rank = useAction((body: { query: string; documents: string[] }) =>
    answer<Ranked>(`/admin/workloads/${w.id}/rerank`, { body }),
  );
  const submit = async (e: Event) => {
    e.preventDefault();
    const documents = lines(docs);
    const r = await rank.run({ query: query.trim(), documents });
    if (r)
      setOut({
        docs: documents,
        results: [...r.data.results].sort((a, b) => b.relevance_score - a.relevance_score),
        requestId: r.requestId,
      });
  };
  return html`<form class="form card" onSubmit=${submit} aria-label="Rank documents">
      <label>Query<input name="query" value=${query} onInput=${(e: Event) => setQuery((e.target as HTMLInputElement).value)} /></label>
      <label>Documents, one per line<textarea name="documents" rows="5" value=${docs} onInput=${(e: Event) => setDocs((e.target as HTMLTextAreaElement).value)}></textarea></label>
      <${ErrorNote} error=${rank.error} />
      <div class="actions"><button type="submit" class="primary" disabled=${rank.busy || !query.trim() || !lines(docs).length}>Rank</button></div>
    </form>
    ${
      out
        ? html`<section aria-labelledby="rank-h"><h2 id="rank-h">Ranking</h2>
      ${out.requestId ? html`<${RequestId} id=${out.requestId} inspect />` : null}
      <div class="table-wrap"><table aria-label="Ranking"><thead><tr><th scope="col">Rank</th><th scope="col">Score</th><th scope="col">Document</th></tr></thead>
        <tbody>${out.results.map((r, i) => html`<tr><td>${i + 1}</td><td><meter min="0" max="1" value=${Math.max(0, Math.min(1, r.relevance_score))} aria-label=${`Score of document ${r.index + 1}`}></meter> ${r.relevance_score.toFixed(4)}</td><td class="doc-text">${out.docs[r.index]}</td></tr>`)}</tbody>
      </table></div>
    </section>`
        : null
    }`;
}
