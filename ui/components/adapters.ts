/**
 * A base workload's LoRA adapters (issue 39) on its page: the list (state, base model, rank, size,
 * source; a failed one's reason), how clients call one, and for operators Add and Remove. Shown for
 * the engines that serve adapters (vLLM, SGLang, llama.cpp); the server refuses the others.
 */
import { BACKENDS } from "../lib/constants";
import { html } from "htm/preact";
import { useEffect, useState } from "preact/hooks";
import { api } from "../lib/api";
import { bytes } from "../lib/format";
import { useAction, useApi } from "../lib/hooks";
import { Can, can } from "../lib/me";
import type { Workload } from "../lib/types";
import type { AdapterView } from "../../src/adapters/service";
import { clientOrigin, useListen } from "./listen-note";
import { projectBaseUrl } from "./snippets";
import { CodeBlock, ConfirmButton, ErrorNote, FieldError, FormError, invalidAt, StateBadge } from "./ui";

/** An adapter as the API lists it. */
export type Adapter = AdapterView;

/** The backends whose engine descriptor has `lora` (agent/engines: vLLM, SGLang, llama.cpp), from the engines embedded in the dashboard. */
export const LORA_BACKENDS = new Set(BACKENDS.filter((e) => e.lora).map((e) => e.id));

/**
 * The request that calls adapter `name` on the project's base URL.
 * @example adapterCurl("http://h:8080/endpoint/demo/v1", "sql") // → "curl http://h:8080/endpoint/demo/v1/chat/completions \\\n …"
 */
export const adapterCurl = (base: string, name: string) =>
  [
    `curl ${base}/chat/completions`,
    `  -H "Authorization: Bearer $INFERD_API_KEY"`,
    `  -H "Content-Type: application/json"`,
    `  -d '${JSON.stringify({ model: name, messages: [{ role: "user", content: "Say hello" }] })}'`,
  ].join(" \\\n");

/** The add form: the name clients will call it by and where its files come from, errors at their field. */
function AddAdapter({ w, onAdded }: { w: Workload; onAdded(): unknown }) {
  const [name, setName] = useState("");
  const [source, setSource] = useState("");
  const add = useAction((body: { name: string; source: string }) =>
    api<Adapter>(`/admin/workloads/${w.id}/adapters`, { body }),
  );
  const submit = async (e: Event) => {
    e.preventDefault();
    if (await add.run({ name: name.trim(), source: source.trim() })) {
      setName("");
      setSource("");
      await onAdded();
    }
  };
  const input = (set: (v: string) => void) => (e: Event) => set((e.target as HTMLInputElement).value);
  return html`<form class="card form" onSubmit=${submit} aria-label="Add an adapter">
    <h3>Add an adapter</h3>
    <${FormError} error=${add.error} />
    <div class="grid2">
      <label>Name
        <input name="name" required value=${name} spellcheck=${false} autocomplete="off" onInput=${input(setName)} placeholder="sql-helper" ...${invalidAt(add.error, "name")} />
        <small>What clients send as <code>model</code>: letters, digits, <code>.</code>, <code>_</code>, <code>-</code>; new in the project.</small>
        <${FieldError} error=${add.error} field="name" /></label>
      <label>Source
        <input name="source" required value=${source} spellcheck=${false} autocomplete="off" onInput=${input(setSource)} placeholder="hf:owner/repo" ...${invalidAt(add.error, "source")} />
        <small>A Hugging Face repo (<code>hf:owner/repo</code>), a GGUF URL, or a path on this machine. It must be trained on <code>${w.model_name}</code>.</small>
        <${FieldError} error=${add.error} field="source" /></label>
    </div>
    <div class="actions"><button type="submit" class="primary" disabled=${add.busy || !name.trim() || !source.trim()}>Add adapter</button></div>
  </form>`;
}

/** Remove one adapter, after a confirm dialog. */
function RemoveAdapter({ w, a, onRemoved }: { w: Workload; a: Adapter; onRemoved(): unknown }) {
  const remove = useAction(() =>
    api(`/admin/workloads/${w.id}/adapters/${encodeURIComponent(a.name)}`, { method: "DELETE" }).then(() => true),
  );
  return html`<${ConfirmButton} class="danger small" label="Remove" title=${`Remove adapter ${a.name}?`} confirm="Remove adapter"
      onConfirm=${async () => (await remove.run()) && onRemoved()}
      body=${html`<p>Requests for <code>${a.name}</code> are refused from then on and the replicas drop it; no restart. Its files stay in the model store.</p>`} />
    <${ErrorNote} error=${remove.error} />`;
}

/** The adapters table's column headings (Remove's column comes after, for those who may). */
const COLUMNS = ["Name", "State", "Base model", "Rank", "Size", "Source"];

/** The table of adapters; `remove` adds a Remove button to each row. */
function AdapterTable({
  w,
  list,
  remove,
  onChange,
}: {
  w: Workload;
  list: Adapter[];
  remove: boolean;
  onChange(): unknown;
}) {
  return html`<div class="table-wrap"><table data-testid="adapters">
    <thead><tr>${COLUMNS.map((c) => html`<th scope="col">${c}</th>`)}
      ${remove ? html`<th scope="col"><span class="offscreen">Actions</span></th>` : null}</tr></thead>
    <tbody>${list.map(
      (a) => html`<tr key=${a.id} data-adapter=${a.name}>
      <td><code>${a.name}</code></td>
      <td><${StateBadge} state=${a.state} />${
        a.state === "failed" && a.reason
          ? html`<div class="reason" data-testid="adapter-reason">${a.reason}</div>`
          : null
      }</td>
      <td>${a.base_model ?? html`<span class="muted">–</span>`}</td>
      <td>${a.rank ?? html`<span class="muted">–</span>`}</td>
      <td>${a.size_bytes ? bytes(a.size_bytes) : html`<span class="muted">–</span>`}</td>
      <td><code class="wrap small-text">${a.source}</code></td>
      ${remove ? html`<td><${RemoveAdapter} w=${w} a=${a} onRemoved=${onChange} /></td>` : null}
    </tr>`,
    )}</tbody></table></div>`;
}

/**
 * The workload page's Adapters section (nothing for engines without adapters). While one is pulling
 * it reads the list again with each refresh of the page's workload (`w`, polled by the page).
 */
export function Adapters({ w }: { w: Workload }) {
  const serves = LORA_BACKENDS.has(w.backend);
  const list = useApi<{ adapters: Adapter[] }>(serves ? `/admin/workloads/${w.id}/adapters` : null);
  const listen = useListen();
  const adapters = list.data?.adapters ?? [];
  const pulling = adapters.some((a) => a.state === "pulling");
  useEffect(() => {
    if (pulling) void list.reload();
  }, [w]);
  if (!serves) return null;
  const base = projectBaseUrl(clientOrigin(listen), w.project_slug);
  const example = adapters.find((a) => a.state === "ready")?.name ?? "<adapter name>";
  const reload = () => list.reload();
  return html`<section aria-labelledby="adapters-h" data-testid="adapters-section"><h2 id="adapters-h">Adapters</h2>
    <p class="muted">LoRA adapters trained on this workload's model, each served under a name of its own by the same replicas: loaded on first use, no restart.</p>
    <${ErrorNote} error=${list.error} />
    ${
      !list.data
        ? null
        : adapters.length === 0
          ? html`<p class="muted" data-testid="no-adapters">No adapter yet.</p>`
          : html`<${AdapterTable} w=${w} list=${adapters} remove=${can("workload.change", w.project_slug)} onChange=${reload} />`
    }
    <details class="adapter-call" data-testid="adapter-call"><summary>Call an adapter</summary>
      <p>On the project's base URL <code class="wrap">${base}</code>, send the adapter's name as <code>model</code>
        (or <code>${w.model_name}:<var>name</var></code>); <code>GET /v1/models</code> lists it with its base model as <code>parent</code>.</p>
      <${CodeBlock} label="curl" code=${adapterCurl(base, example)} />
    </details>
    <${Can} do="workload.change" project=${w.project_slug}><${AddAdapter} w=${w} onAdded=${reload} /><//>
  </section>`;
}
