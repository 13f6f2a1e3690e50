/** The heading and section tabs shared by a workload's pages. */
import { html } from "htm/preact";
import type { Workload } from "../lib/types";
import { BACKENDS, PLAYGROUND_TASKS } from "../lib/constants";
import { PageTitle, Tabs } from "./ui";
import { can } from "../lib/me";

/** Title, project link, backend and model, and the tabs of a workload. */
export function WorkloadHead({ w, current }: { w: Workload; current: string }) {
  const base = `/workloads/${w.id}`;
  const backend = BACKENDS.find((b) => b.id === w.backend)?.label ?? w.backend;
  return html`<${PageTitle} sub=${html`<a href=${`/projects/${w.project_slug}`}>${w.project_slug}</a> / <code>${w.slug}</code> · ${backend} · <span class="wrap">${w.model_name}</span>`}>${w.name}<//>
    <${Tabs} current=${current} items=${[
      { href: base, label: "Overview" },
      ...(PLAYGROUND_TASKS.has(w.task_type) && can("playground", w.project_slug)
        ? [{ href: `${base}/playground`, label: "Playground" }]
        : []),
      ...(can("logs.read", w.project_slug) ? [{ href: `${base}/logs`, label: "Logs" }] : []),
      { href: `${base}/requests`, label: "Requests" },
      { href: `${base}/webhooks`, label: "Webhooks & jobs" },
      ...(can("workload.change", w.project_slug) ? [{ href: `${base}/edit`, label: "Edit" }] : []),
    ]} />`;
}
