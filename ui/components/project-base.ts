/**
 * The project's base URL on the project page: one OpenAI-compatible URL for every model of the
 * project (routed by `model`), ready-to-copy snippets for one of its models, and how to point other
 * tools at it (Open WebUI, Continue, an Ollama client).
 */
import { html } from "htm/preact";
import { useState } from "preact/hooks";
import type { Workload } from "../lib/types";
import { clientOrigin, ListenNote, useListen } from "./listen-note";
import { projectBaseUrl, projectSnippets, SnippetBlocks } from "./snippets";
import { CodeBlock, CopyButton } from "./ui";

/** What the tool notes stand in for a model name when the project has no workload yet. */
const SOME_MODEL = "<model name>";

/** The workload the snippets show first: a chat one if there is one, else the first the project base serves. */
const firstChat = (ws: Workload[]) => ws.find((w) => w.task_type === "text2text") ?? ws[0];

/** Continue's `config.yaml` entry for one model on the project base. */
const continueConfig = (base: string, model: string) => `models:
  - name: ${model}
    provider: openai
    model: ${model}
    apiBase: ${base}
    apiKey: <a live key of this project>`;

/** The `ollama` JavaScript client on the project (its Ollama API sits beside `/v1`). */
const ollamaClient = (host: string, model: string) => `import { Ollama } from "ollama";

const ollama = new Ollama({ host: "${host}", headers: { Authorization: \`Bearer \${process.env.INFERD_API_KEY}\` } });
const reply = await ollama.chat({ model: ${JSON.stringify(model)}, messages: [{ role: "user", content: "Say hello" }] });
console.log(reply.message.content);`;

/** How to point Open WebUI, Continue and an Ollama client at the project's base URL. */
export function ToolNotes({ base, ollamaHost, model }: { base: string; ollamaHost: string; model: string }) {
  return html`<section class="tool-notes" aria-labelledby="tools-h" data-testid="tool-notes">
    <h3 id="tools-h">Point other tools at it</h3>
    <div data-testid="note-open-webui">
      <h4>Open WebUI</h4>
      <p>Admin Settings → Connections → OpenAI API → add a connection: URL <code class="wrap">${base}</code> and a live key of this project as the key. Its model list comes from <code>/v1/models</code>.</p>
    </div>
    <div data-testid="note-continue">
      <h4>Continue</h4>
      <p>Add a model to <code>config.yaml</code> with <code>provider: openai</code> and <code>apiBase</code> set to the base URL:</p>
      <${CodeBlock} label="Continue config.yaml" code=${continueConfig(base, model)} />
    </div>
    <div data-testid="note-ollama">
      <h4>Ollama clients</h4>
      <p>The Ollama API answers beside <code>/v1</code>: set the client's host to <code class="wrap">${ollamaHost}</code> and send the key as a bearer <code>Authorization</code> header (the <code>ollama</code> command line cannot send one; use a client library).</p>
      <${CodeBlock} label="ollama (JavaScript)" code=${ollamaClient(ollamaHost, model)} />
    </div>
  </section>`;
}

/** The project's base URL card: the URL to copy, snippets for a model chosen among the project's workloads, and the tool notes. */
export function ProjectBase({ project, workloads }: { project: string; workloads: Workload[] }) {
  const listen = useListen();
  const origin = clientOrigin(listen);
  const base = projectBaseUrl(origin, project);
  const callable = workloads.filter((w) => projectSnippets(w, undefined, origin));
  const [chosenId, choose] = useState<string>();
  const chosen = callable.find((w) => w.id === chosenId) ?? firstChat(callable);
  const s = chosen && projectSnippets(chosen, undefined, origin);
  return html`<section class="card project-base" aria-labelledby="pbase-h" data-testid="project-base">
    <h2 id="pbase-h">Base URL</h2>
    <p class="muted">One OpenAI-compatible base URL for every model of this project. The <code>model</code> a client sends picks the workload: its model name, one of its aliases, or its slug; <code>GET /v1/models</code> lists what a key may call.</p>
    <div class="secret-row"><code class="secret-value" data-testid="project-base-url">${base}</code><${CopyButton} text=${base} name="Copy the base URL" /></div>
    <${ListenNote} listen=${listen} lan="Other machines on your network reach inferd at" />
    ${
      s && chosen
        ? html`
      ${
        callable.length > 1
          ? html`<label class="inline-field">Model in the snippets
        <select name="snippet_model" value=${chosen.id} onChange=${(e: Event) => choose((e.target as HTMLSelectElement).value)}>
          ${callable.map((w) => html`<option value=${w.id}>${w.model_name} (${w.slug})</option>`)}
        </select></label>`
          : null
      }
      <p class="muted">Set <code>INFERD_API_KEY</code> to a live key of this project (create one under Keys).</p>
      <div class="snippets"><${SnippetBlocks} s=${s} /></div>`
        : html`<p class="muted">Create a workload: its model name is what clients send as <code>model</code>.</p>`
    }
    <${ToolNotes} base=${base} ollamaHost=${`${origin}/endpoint/${project}`} model=${chosen?.model_name ?? SOME_MODEL} />
  </section>`;
}
