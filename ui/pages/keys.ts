/** A project's keys: create (secret shown once), scope and endpoints, usage, revoke. */
import { html } from "htm/preact";
import { useState } from "preact/hooks";
import { api } from "../lib/api";
import { useAction, useApi } from "../lib/hooks";
import { ago, count } from "../lib/format";
import type { Key, RequestPage, Workload } from "../lib/types";
import { ConfirmButton, ErrorNote, Loading, SecretOnce } from "../components/ui";
import { KeyLimitsCell, KeyLimitsText } from "../components/limits";
import { ProjectHead } from "./project";
import { Can, can } from "../lib/me";
import { ConnectTool } from "../components/connect-tool";

const val = (e: Event) => (e.target as HTMLInputElement).value;

/** The create-key form. */
function NewKey({
  project,
  workloads,
  onCreated,
}: {
  project: string;
  workloads: Workload[];
  onCreated(k: Key): void;
}) {
  const [name, setName] = useState("");
  const [type, setType] = useState<"live" | "sdk">("live");
  const [scope, setScope] = useState<"project" | "endpoints">("project");
  const [endpoints, setEndpoints] = useState<string[]>([]);
  const create = useAction((body: Record<string, unknown>) =>
    api<Key>(`/admin/projects/${encodeURIComponent(project)}/keys`, { body }),
  );
  const toggle = (ep: string) =>
    setEndpoints(endpoints.includes(ep) ? endpoints.filter((x) => x !== ep) : [...endpoints, ep]);
  const submit = async (e: Event) => {
    e.preventDefault();
    const k = await create.run({ name: name.trim(), type, scope, ...(scope === "endpoints" ? { endpoints } : {}) });
    if (k) {
      setName("");
      onCreated(k);
    }
  };
  return html`<form class="card form" onSubmit=${submit} aria-label="New key">
    <h2>New key</h2>
    <label>Name<input name="name" required value=${name} onInput=${(e: Event) => setName(val(e))} placeholder="my-app" /></label>
    <fieldset class="row"><legend>Type</legend>
      <label class="choice"><input type="radio" name="type" checked=${type === "live"} onChange=${() => setType("live")} /><span><strong>Live</strong><small>Calls models: the data plane (<code>/endpoint/…</code>).</small></span></label>
      <label class="choice"><input type="radio" name="type" checked=${type === "sdk"} onChange=${() => setType("sdk")} /><span><strong>SDK</strong><small>Manages workloads: the control plane (<code>/api</code>).</small></span></label>
    </fieldset>
    <fieldset class="row"><legend>Scope</legend>
      <label class="choice"><input type="radio" name="scope" checked=${scope === "project"} onChange=${() => setScope("project")} /><span><strong>Whole project</strong></span></label>
      <label class="choice"><input type="radio" name="scope" checked=${scope === "endpoints"} onChange=${() => setScope("endpoints")} /><span><strong>Only some endpoints</strong></span></label>
    </fieldset>
    ${
      scope === "endpoints"
        ? html`<fieldset><legend>Endpoints this key may use</legend>
          ${workloads.length === 0 ? html`<p class="muted">This project has no workloads yet.</p>` : null}
          ${workloads.map((w) => {
            const ep = `${w.project_slug}/${w.slug}`;
            return html`<label class="check"><input type="checkbox" checked=${endpoints.includes(ep)} onChange=${() => toggle(ep)} /> <code>${ep}</code></label>`;
          })}</fieldset>`
        : null
    }
    <${ErrorNote} error=${create.error} />
    <div class="actions"><button type="submit" class="primary" disabled=${create.busy || !name.trim() || (scope === "endpoints" && endpoints.length === 0)}>Create key</button></div>
  </form>`;
}

/** The keys page of a project. */
export function KeysPage({ project }: { project: string }) {
  const keys = useApi<Key[]>(`/admin/projects/${encodeURIComponent(project)}/keys`, 5000);
  const workloads = useApi<Workload[]>(`/admin/projects/${encodeURIComponent(project)}/workloads`);
  const [fresh, setFresh] = useState<Key>();
  /** The key "Connect a tool" is open for. */
  const [connect, setConnect] = useState<string>();
  const revoke = useAction((id: string) => api(`/admin/keys/${id}`, { method: "DELETE" }).then(() => true));
  const created = (k: Key) => {
    setFresh(k);
    void keys.reload();
  };
  return html`<${ProjectHead} project=${project} current=${`/projects/${project}/keys`} />
    ${fresh?.secret ? html`<${SecretOnce} secret=${fresh.secret} what=${`${fresh.type} key "${fresh.name}"`} onDone=${() => setFresh(undefined)} />` : null}
    ${fresh?.secret && fresh.type === "live" && connect !== fresh.id ? html`<div class="actions"><button type="button" onClick=${() => setConnect(fresh.id)}>Connect a tool with key ${fresh.name}</button></div>` : null}
    ${connect ? html`<${ConnectTool} key=${connect} project=${project} keyId=${connect} secret=${fresh?.secret && fresh.id === connect ? { keyId: fresh.id, value: fresh.secret } : undefined} onClose=${() => setConnect(undefined)} />` : null}
    <${Can} do="key.change" project=${project} note><${NewKey} project=${project} workloads=${workloads.data ?? []} onCreated=${created} /><//>
    <h2>Keys</h2>
    <${ErrorNote} error=${revoke.error} />
    ${
      keys.error
        ? html`<${ErrorNote} error=${keys.error} />`
        : !keys.data
          ? html`<${Loading} />`
          : keys.data.length === 0
            ? html`<p class="muted">No keys yet.</p>`
            : html`<div class="table-wrap"><table>
          <thead><tr><th scope="col">Name</th><th scope="col">Type</th><th scope="col">Scope</th><th scope="col">Requests</th><th scope="col">Tokens</th><th scope="col">Last used</th><th scope="col">Limits</th><th scope="col"><span class="offscreen">Actions</span></th></tr></thead>
          <tbody>${keys.data.map(
            (k) => html`<tr class=${k.revoked_at ? "revoked" : ""}>
            <td>${k.name}<br /><code class="muted">${k.prefix}…</code></td><td>${k.type}</td>
            <td>${k.scope === "project" ? "whole project" : k.endpoints.map((e) => html`<code>${e}</code> `)}</td>
            <td>${count(k.usage.requests)}</td><td>${count(k.usage.total_tokens)}</td><td>${ago(k.usage.last_used_at)}</td>
            <td class="limits-cell">${k.revoked_at || !can("key.change", project) ? (k.revoked_at ? html`<span class="limits-text">–</span>` : html`<${KeyLimitsText} limits=${k.limits} />`) : html`<${KeyLimitsCell} keyId=${k.id} name=${k.name} limits=${k.limits} onSaved=${keys.reload} />`}</td>
            <td class="key-actions">${!k.revoked_at && k.type === "live" ? html`<button type="button" class="small" onClick=${() => setConnect(k.id)} aria-label=${`Connect a tool with key ${k.name}`}>Connect a tool</button> ` : null}${
              k.revoked_at
                ? html`<span class="badge">revoked</span>`
                : !can("key.change", project)
                  ? null
                  : html`<${ConfirmButton} label="Revoke" title=${`Revoke key ${k.name}?`} confirm="Revoke key"
              onConfirm=${async () => (await revoke.run(k.id)) && keys.reload()} body=${html`<p>Requests with <code>${k.prefix}…</code> fail from the next one on.</p>`} />`
            }</td>
          </tr>`,
          )}</tbody>
        </table></div>`
    }
    <${KeyRefusals} project=${project} />`;
}

/**
 * The project's keys' latest refusals (their limits, quotas, switched-off routes, bad requests): when,
 * which key, why; each opens the request, and "All refusals" the project's filtered list.
 */
function KeyRefusals({ project }: { project: string }) {
  const p = encodeURIComponent(project);
  const refused = useApi<RequestPage>(`/admin/projects/${p}/requests?status=refused&limit=10`, 5000);
  const rows = (refused.data?.requests ?? []).filter((r) => r.key);
  return html`<section class="card" aria-labelledby="key-refusals" data-testid="key-refusals">
    <h2 id="key-refusals">Refused requests</h2>
    ${
      refused.error
        ? html`<${ErrorNote} error=${refused.error} />`
        : !refused.data
          ? html`<${Loading} />`
          : rows.length === 0
            ? html`<p class="muted">No key's request was refused lately: none hit its limits or quotas.</p>`
            : html`<div class="table-wrap"><table>
          <thead><tr><th scope="col">Time</th><th scope="col">Key</th><th scope="col">Status</th><th scope="col">Why</th></tr></thead>
          <tbody>${rows.map(
            (r) => html`<tr data-testid="key-refusal">
            <td><a href=${`/requests/${encodeURIComponent(r.id)}`}>${new Date(r.at).toLocaleTimeString()}</a></td>
            <td>${r.key!.name ?? "(deleted key)"} <code class="muted">${r.key!.prefix ?? ""}</code><div class="small-text"><a href=${`/projects/${p}/requests?status=refused&key=${encodeURIComponent(r.key!.id)}`}>all of this key's</a></div></td>
            <td><span class="badge state-failed">${r.status}</span> <code>${r.error_code ?? ""}</code></td>
            <td class="wrap">${r.error_message ?? "–"}</td>
          </tr>`,
          )}</tbody>
        </table></div>`
    }
    <p class="small-text"><a href=${`/projects/${p}/requests?status=refused`}>All refusals of the project</a> · counted per key in <code>/metrics</code> as <code>inferd_requests_refused_total</code> and as errors on the Usage page.</p>
  </section>`;
}
