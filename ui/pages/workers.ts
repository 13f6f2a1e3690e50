/** Workers: GPUs with live utilisation and memory, replicas, adding (join command) and deleting. */
import { html } from "htm/preact";
import { useState } from "preact/hooks";
import { api } from "../lib/api";
import { useAction, useApi, useNow } from "../lib/hooks";
import { ago, bytes, mib } from "../lib/format";
import type { Info, Worker } from "../lib/types";
import { Hosts } from "../components/hosts";
import { ListenNote, useListen } from "../components/listen-note";
import { Bar, CodeBlock, ConfirmButton, ErrorNote, Loading, PageTitle, StateBadge } from "../components/ui";
import { replicaPlace, ReplicaStatus } from "../components/replica-status";
import { Can, can } from "../lib/me";

type Joined = { id: string; name: string; join_token: string; join_command: string };

/** The host RAM the worker's sleeping replicas hold (their weights, at level 1), when any sleeps. */
function SleepRam({ replicas }: { replicas: { state: string; host_ram_mib?: number | null }[] }) {
  const asleep = replicas.filter((r) => r.state === "sleeping");
  if (!asleep.length) return null;
  const held = asleep.reduce((s, r) => s + (r.host_ram_mib ?? 0), 0);
  return html`<p class="muted small-text" data-testid="sleep-ram">${asleep.length} asleep, holding ${mib(held)} of host RAM (they wake in a moment; stopped when RAM is needed).</p>`;
}

/**
 * Where the joining machine gets inferd: the single executable `bun run build` makes, or a clone of
 * this repository run with Bun (the same command, started by `bun run start --`).
 */
function WhereToGetIt({ command }: { command: string }) {
  return html`<div class="where-binary" data-testid="where-binary">
    <p>That machine needs inferd, either of two ways:</p>
    <ul>
      <li><strong>The single executable.</strong> In a clone of the inferd repository, <code>bun run build</code> writes <code>dist/inferd-linux-x64</code> (<code>bun run build --all</code> also makes linux-arm64, darwin-arm64 and windows-x64). Copy it to that machine as <code>inferd</code> (or run it by its path, <code>./inferd-linux-x64 agent join …</code>); it needs nothing beside it.</li>
      <li><strong>A clone of the repository</strong> with Bun 1.4.5 (<code>npm i -g bun@1.4.5 && bun install</code>): run the same command through the start script.</li>
    </ul>
    <${CodeBlock} label="From a clone" code=${command.replace(/^inferd /, "bun run start -- ")} />
  </div>`;
}

/** The add-worker form, then its join command. */
function AddWorker({ onAdded }: { onAdded(): void }) {
  const [name, setName] = useState("");
  const [joined, setJoined] = useState<Joined>();
  const add = useAction((n: string) => api<Joined>("/admin/workers", { body: { name: n } }));
  const listen = useListen();
  const submit = async (e: Event) => {
    e.preventDefault();
    const j = await add.run(name.trim());
    if (j) {
      setJoined(j);
      setName("");
      onAdded();
    }
  };
  return html`<details class="card" open=${!!joined}>
    <summary>Add a worker</summary>
    <p class="muted">Another GPU machine on your network runs only inferd's agent and joins this server.</p>
    <${ListenNote} listen=${listen} />
    <form class="form inline" onSubmit=${submit} aria-label="Add a worker">
      <label>Worker name<input name="worker" required value=${name} onInput=${(e: Event) => setName((e.target as HTMLInputElement).value)} placeholder="gpu-box-2" /></label>
      <${ErrorNote} error=${add.error} />
      <div class="actions"><button type="submit" class="primary" disabled=${add.busy || !name.trim()}>Add worker</button></div>
    </form>
    ${
      joined
        ? html`<div class="joined" data-testid="join">
      <p>Run this on <strong>${joined.name}</strong>. <strong>The command holds a join token shown only now.</strong></p>
      <${CodeBlock} label="Join command" code=${joined.join_command} />
    </div>
    <${WhereToGetIt} command=${joined.join_command} />`
        : null
    }
  </details>`;
}

/** One worker's card. */
function WorkerCard({ w, now, onDeleted, where }: { w: Worker; now: number; onDeleted(): void; where: string }) {
  const del = useAction(() => api(`/admin/workers/${w.id}`, { method: "DELETE" }).then(() => true));
  const ram = w.telemetry?.ram_free_bytes;
  return html`<li class="card worker" aria-label=${`Worker ${w.name}`}>
    <div class="worker-head">
      <h2>${w.name}</h2>${w.last_seen_at ? html`<${StateBadge} state=${w.state} />` : html`<span class="badge state-waiting">${w.cloud ? "joining" : "waiting to join"}</span>`}
      ${w.cloud?.label ? html`<span class="badge state-failed" title=${w.cloud.reason ?? ""}>${w.cloud.label}</span>` : null}
      ${
        w.cloud
          ? html`<span class="muted">${w.cloud.provider} pod ${w.cloud.pod_id} · ${w.cloud.gpus}× ${w.cloud.gpu_type}${w.cloud.cost_per_hour !== null ? ` · $${w.cloud.cost_per_hour.toFixed(2)}/h, $${(w.cloud.billed_cost ?? 0).toFixed(2)} so far` : ""}</span>`
          : null
      }
      ${
        w.last_seen_at
          ? html`<span class="muted">${where} · ${w.cpu_cores} cores · ${bytes(w.ram_bytes)} RAM${ram !== undefined ? ` (${bytes(ram)} free)` : ""} · seen ${ago(w.last_seen_at)}</span>`
          : html`<span class="muted">waiting for its agent to join</span>`
      }
    </div>
    ${
      !w.last_seen_at
        ? null
        : w.gpus.length === 0
          ? html`<p class="muted">No GPU: runs llama.cpp and Ollama on the CPU.</p>`
          : html`<ul class="gpus">
      ${w.gpus.map(
        (g) => html`<li class="gpu" data-testid="gpu">
        <div class="gpu-name">GPU ${g.index} · ${g.name ?? "GPU"}${g.temperature_c !== undefined ? html` · <span>${g.temperature_c} °C</span>` : null}</div>
        <${Bar} label="Utilisation" value=${g.utilization_percent} max=${100} text=${`${g.utilization_percent}%`} />
        <${Bar} label="Memory" value=${g.memory_used_mib} max=${g.memory_total_mib} text=${`${mib(g.memory_used_mib)} / ${mib(g.memory_total_mib)}`} />
      </li>`,
      )}</ul>`
    }
    <h3>Replicas</h3>
    <${SleepRam} replicas=${w.replicas} />
    ${
      w.replicas.length === 0
        ? html`<p class="muted">None.</p>`
        : html`<ul class="replicas">${w.replicas.map(
            (r) => html`<li key=${r.assignment_id}>
      <a href=${`/workloads/${r.workload_id}`}>${r.workload}</a> <span class="muted" data-testid="replica-gpus">${replicaPlace(r, r.engine)}${r.sleep_level ? ` · level ${r.sleep_level}${r.host_ram_mib ? `, ${mib(r.host_ram_mib)} of host RAM` : ""}` : ""}</span>
      <${ReplicaStatus} now=${now} r=${{ workloadId: r.workload_id, assignmentId: r.assignment_id, state: r.state, reason: r.reason, progress: r.progress, updatedAt: r.updated_at }} /></li>`,
          )}</ul>`
    }
    ${
      w.kind === "local" || !can("worker.change")
        ? null
        : html`<div class="actions">
      <${ErrorNote} error=${del.error} />
      <${ConfirmButton} label="Delete worker" title=${`Delete worker ${w.name}?`} confirm="Delete worker" body=${html`<p>Its replicas move elsewhere and its agent can no longer connect.</p>`}
        onConfirm=${async () => (await del.run()) && onDeleted()} /></div>`
    }
  </li>`;
}

/** The workers page. */
export function Workers() {
  const list = useApi<Worker[]>("/admin/workers", 2000);
  const info = useApi<Info>("/admin/info", 2000);
  const now = useNow();
  const cluster = info.data?.cluster;
  /** Where a worker is: this machine, another host's machine (in a cluster), or the agent's own. */
  const where = (w: Worker) => {
    if (w.kind !== "local") return w.hostname;
    if (!cluster || !w.host_id || w.host_id === cluster.host_id) return "this machine";
    return `the machine of host ${cluster.hosts.find((h) => h.id === w.host_id)?.name ?? w.host_id}`;
  };
  return html`<${PageTitle} sub="Machines that run your workloads, refreshed every 2 s.">Workers<//>
    <${Hosts} cluster=${cluster} now=${now} />
    <${Can} do="worker.change"><${AddWorker} onAdded=${() => list.reload()} /><//>
    ${
      list.error
        ? html`<${ErrorNote} error=${list.error} />`
        : !list.data
          ? html`<${Loading} />`
          : html`<ul class="workers">${list.data.map((w) => html`<${WorkerCard} key=${w.id} w=${w} now=${now} where=${where(w)} onDeleted=${() => list.reload()} />`)}</ul>`
    }`;
}
