/**
 * "Use with a coding agent": for a chat workload, the settings each coding agent takes (Claude
 * Code, Codex, opencode, Qwen Code), the same `inferd launch` writes (src/coding-agents.ts), and the
 * command that does it; and what the runtime needs to call tools.
 */
import { html } from "htm/preact";
import { useState } from "preact/hooks";
import { AGENTS, TOOL_FLAGS } from "../../src/coding-agents";
import { CodeBlock } from "./ui";
import { clientOrigin, useListen } from "./listen-note";

/** What the panel needs of a workload. */
interface AgentWorkload {
  project_slug: string;
  slug: string;
  backend: string;
  task_type: string;
  model_name: string;
}

/** The panel, for chat workloads only. */
export function CodingAgents({ w }: { w: AgentWorkload }) {
  const listen = useListen();
  const [agent, setAgent] = useState("claude");
  if (w.task_type !== "text2text" && w.task_type !== "image2text") return null;
  const kind = AGENTS[agent];
  const settings = kind.settings(
    { url: clientOrigin(listen), project: w.project_slug, key: "<a live key of this project>", model: w.model_name },
    `<data-dir>/agents/${agent}`,
  );
  const env = Object.entries(settings.env)
    .map(([k, v]) => `export ${k}=${JSON.stringify(v)}`)
    .join("\n");
  const flags = TOOL_FLAGS[w.backend];
  return html`<section class="snippet-group" aria-label="Use with a coding agent" data-testid="coding-agents">
    <h3>Use with a coding agent</h3>
    <label>Agent <select name="agent" value=${agent} onChange=${(e: Event) => setAgent((e.target as HTMLSelectElement).value)}>
      ${Object.entries(AGENTS).map(([id, a]) => html`<option value=${id}>${a.label}</option>`)}
    </select></label>
    <p class="muted">On this machine, <code>inferd launch ${agent} --project ${w.project_slug} --workload ${w.slug}</code> makes a key, writes these settings and starts ${kind.label}. Elsewhere, set them yourself:</p>
    ${flags ? html`<p class="muted">${kind.label} calls tools: the runtime's command needs <code>${flags}</code>.</p>` : null}
    ${env ? html`<${CodeBlock} label=${`${kind.label}: environment`} code=${env} />` : null}
    ${settings.args ? html`<${CodeBlock} label=${`${kind.label}: start it with`} code=${`${kind.program} ${settings.args.join(" ")}`} />` : null}
    ${settings.files.map((f) => html`<${CodeBlock} label=${f.path} code=${f.text} />`)}
  </section>`;
}
