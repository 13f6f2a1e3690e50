/**
 * "Connect a tool": pick Open WebUI, Continue, Claude Code, Codex, opencode, the OpenAI or
 * Anthropic SDK or curl, get its exact settings with the project's base URL and the key filled in
 * (the secret when it was just made, else a placeholder to replace), the Docker note for a tool in
 * a container, and watch the first request with that key arrive, with its result. The coding
 * agents' settings are the ones `inferd launch` writes (src/coding-agents.ts); the SDK and curl
 * snippets are the Snippets' (./snippets.ts): one source for each tool.
 */
import { html } from "htm/preact";
import { useEffect, useRef, useState } from "preact/hooks";
import { api, ApiError } from "../lib/api";
import { useApi } from "../lib/hooks";
import type { Key, Workload } from "../lib/types";
import type { RequestRow } from "../../src/inspector/service";
import { AGENTS } from "../../src/coding-agents";
import { anthropicSnippets, projectBaseUrl, projectSnippets } from "./snippets";
import { clientOrigin, ListenNote, useListen } from "./listen-note";
import { CodeBlock, ErrorNote, Loading } from "./ui";

/** Where a tool is pointed: the server's origin for clients, the project, the key (or its placeholder), the model. */
export interface ConnectTarget {
  origin: string;
  project: string;
  key: string;
  model: string;
  /** The workload the model names (for the SDK snippets fitted to its task type), when the project has one. */
  workload?: Workload;
}

/** What the view shows for a tool: steps in words, code blocks, and whether it usually runs in a container. */
interface ToolView {
  steps?: string;
  blocks: { label: string; code: string }[];
  container?: boolean;
}

/** The tools offered, in the order shown. */
export const TOOLS: { id: string; label: string; view(t: ConnectTarget): ToolView }[] = [
  { id: "open-webui", label: "Open WebUI", view: openWebUi },
  { id: "continue", label: "Continue", view: (t) => agentView("cn", t, "$HOME/.continue") },
  { id: "claude", label: "Claude Code", view: (t) => agentView("claude", t, "") },
  { id: "codex", label: "Codex", view: (t) => agentView("codex", t, "$HOME/.inferd/codex") },
  { id: "opencode", label: "opencode", view: (t) => agentView("opencode", t, "$HOME/.inferd/opencode") },
  { id: "openai", label: "OpenAI SDK", view: openAiSdk },
  { id: "anthropic", label: "Anthropic SDK", view: anthropicSdk },
  { id: "curl", label: "curl", view: curl },
];

/** Whether an origin's host is this machine's loopback (a container cannot reach it under that name). */
const loopback = (origin: string) => /^(localhost|127\.\d+\.\d+\.\d+|\[::1\])$/.test(new URL(origin).hostname);

/**
 * The origin a container reaches this machine at: `host.docker.internal` instead of a loopback
 * host, the LAN address as it is.
 * @example fromContainer("http://127.0.0.1:8080") // → "http://host.docker.internal:8080"
 */
export function fromContainer(origin: string): string {
  if (!loopback(origin)) return origin;
  const u = new URL(origin);
  u.hostname = "host.docker.internal";
  return u.origin;
}

/** A word for a POSIX shell, double-quoted (so `$HOME` still expands). */
const quoted = (s: string) => JSON.stringify(s);

/** Open WebUI: its Connections form, or the container started with the connection set. */
function openWebUi(t: ConnectTarget): ToolView {
  const base = projectBaseUrl(fromContainer(t.origin), t.project);
  return {
    container: true,
    steps:
      "Admin Settings → Connections → OpenAI API → add a connection with the URL and the key below. Its model picker lists what the key may call (GET /v1/models).",
    blocks: [
      { label: "Open WebUI: connection URL", code: base },
      { label: "Open WebUI: API key", code: t.key },
      {
        label: "Open WebUI in Docker, connected",
        code: [
          "docker run -d -p 3000:8080 \\",
          "  --add-host=host.docker.internal:host-gateway \\",
          `  -e OPENAI_API_BASE_URL=${quoted(base)} \\`,
          `  -e OPENAI_API_KEY=${quoted(t.key)} \\`,
          "  -v open-webui:/app/backend/data --name open-webui \\",
          "  ghcr.io/open-webui/open-webui:main",
        ].join("\n"),
      },
    ],
  };
}

/** A coding agent (or Continue): the environment, start arguments and files `inferd launch` would give it. */
function agentView(agent: string, t: ConnectTarget, dir: string): ToolView {
  const kind = AGENTS[agent];
  const s = kind.settings({ url: t.origin, project: t.project, key: t.key, model: t.model }, dir);
  const env = Object.entries(s.env)
    .map(([k, v]) => `export ${k}=${quoted(v)}`)
    .join("\n");
  const blocks = [
    ...(env ? [{ label: `${kind.label}: environment`, code: `${env}\n${kind.program}` }] : []),
    ...s.files.map((f) => ({ label: f.path, code: f.text })),
    ...(s.args ? [{ label: `${kind.label}: start it with`, code: `${kind.program} ${s.args.join(" ")}` }] : []),
  ];
  const steps: Record<string, string> = {
    cn: "Continue's editor extensions read this file as ~/.continue/config.yaml; its command line (cn) takes it with --config.",
    claude:
      "Set these in the shell that starts Claude Code (or in its settings.json under env); it calls the Messages route.",
    codex: "Codex reads config.toml from CODEX_HOME: this one leaves your own ~/.codex alone.",
    opencode: "opencode reads the file OPENCODE_CONFIG names; pick the model inferd/… in it.",
  };
  return { steps: steps[agent], blocks };
}

/** The workload the SDK snippets are fitted to: the chosen one, else a chat workload named by the model. */
const snippetWorkload = (t: ConnectTarget) =>
  t.workload ?? { project_slug: t.project, slug: t.model, task_type: "text2text", model_name: t.model };

/** The OpenAI SDK in Python and JavaScript on the project's base URL. */
function openAiSdk(t: ConnectTarget): ToolView {
  const s = projectSnippets(snippetWorkload(t), t.key, t.origin);
  if (!s) return { steps: "This model is served through async jobs only: see its workload's snippets.", blocks: [] };
  return {
    steps: `base_url is the project's base URL; model picks the workload (${t.model}).`,
    blocks: [
      { label: "OpenAI SDK (Python)", code: s.python },
      { label: "OpenAI SDK (JavaScript)", code: s.js },
    ],
  };
}

/** The Anthropic SDK in Python and JavaScript (base URL without /v1). */
function anthropicSdk(t: ConnectTarget): ToolView {
  const s = anthropicSnippets(t.origin, t.project, t.model, t.key);
  return {
    steps: "The Anthropic SDK adds /v1/messages itself: its base URL is the project's endpoint without /v1.",
    blocks: [
      { label: "Anthropic SDK (Python)", code: s.python },
      { label: "Anthropic SDK (JavaScript)", code: s.js },
    ],
  };
}

/** One request with curl. */
function curl(t: ConnectTarget): ToolView {
  const s = projectSnippets(snippetWorkload(t), t.key, t.origin);
  return { blocks: s ? [{ label: "curl", code: s.curl }] : [] };
}

/** The placeholder written where a key's secret goes when the view does not have it. */
export const placeholder = (k: { name: string }) => `<secret of key ${k.name}>`;

/** A request as the watch reads it: the inspector's row, with its workload and the reason it failed. */
export type WatchedRequest = RequestRow & { workload_id?: string; error_message?: string | null };

/**
 * The first request made with key `keyId` since `since` (an ISO time), polled every second until
 * one arrives; `missing` when the server has no such listing.
 */
export function useFirstRequest(projectId: string | undefined, keyId: string | undefined, since: string) {
  const [found, setFound] = useState<WatchedRequest>();
  const [missing, setMissing] = useState(false);
  useEffect(() => {
    setFound(undefined);
    setMissing(false);
    if (!projectId || !keyId) return;
    let stop = false;
    const path = `/admin/projects/${encodeURIComponent(projectId)}/requests?key=${encodeURIComponent(keyId)}&since=${encodeURIComponent(since)}&limit=20`;
    const poll = async () => {
      try {
        const page = await api<{ requests: WatchedRequest[] }>(path);
        const first = [...page.requests].sort((a, b) => a.at.localeCompare(b.at))[0];
        if (first && !stop) return setFound(first);
      } catch (e) {
        if (e instanceof ApiError && e.status === 404 && !stop) return setMissing(true);
      }
      if (!stop) timer = setTimeout(poll, 1000);
    };
    let timer = setTimeout(poll, 0);
    return () => {
      stop = true;
      clearTimeout(timer);
    };
  }, [projectId, keyId, since]);
  return { found, missing };
}

/** The first request's result in words: status, model, tokens, the reason it failed, and a link to it. */
function Arrived({ r }: { r: WatchedRequest }) {
  const ok = r.status < 400;
  const tokens = r.tokens_in == null && r.tokens_out == null ? "–" : `${r.tokens_in ?? 0} in, ${r.tokens_out ?? 0} out`;
  const reason = r.error_message || r.error_code;
  return html`<div class=${`note ${ok ? "" : "error"}`} role="status" data-testid="connect-arrived">
    <p><strong>${ok ? "The first request arrived and was answered." : "The first request arrived and failed."}</strong></p>
    <dl class="facts">
      <div><dt>Status</dt><dd data-testid="arrived-status">${r.status}</dd></div>
      <div><dt>Model</dt><dd data-testid="arrived-model">${r.model ?? "–"}</dd></div>
      <div><dt>Tokens</dt><dd data-testid="arrived-tokens">${tokens}</dd></div>
      <div><dt>Route</dt><dd><code>${r.route}</code></dd></div>
    </dl>
    ${reason ? html`<p data-testid="arrived-error">${r.error_code ? html`<code>${r.error_code}</code> ` : null}${r.error_message ?? ""}</p>` : null}
    ${r.workload_id ? html`<p><a href=${`/workloads/${r.workload_id}/requests/${r.id}`}>Open it in the inspector</a></p>` : null}
  </div>`;
}

/** The live watch: waiting for the key's first request, then its result. */
function Watch({ projectId, k, since }: { projectId?: string; k?: Key; since: string }) {
  const { found, missing } = useFirstRequest(projectId, k?.id, since);
  if (!k) return null;
  return html`<section class="connect-watch" aria-label="The first request" aria-live="polite" data-testid="connect-watch">
    <h3>First request</h3>
    ${
      found
        ? html`<${Arrived} r=${found} />`
        : missing
          ? html`<p class="muted">This server does not list a project's requests; see them in each workload's Requests.</p>`
          : html`<p class="muted" data-testid="connect-waiting">Waiting for a request with key <strong>${k.name}</strong> (<code>${k.prefix}…</code>) since ${new Date(since).toLocaleTimeString()}: send one from the tool and it shows here.</p>`
    }
  </section>`;
}

/** The project's workloads a tool can call by model name: chat ones first. */
const callable = (ws: Workload[]) =>
  [...ws].sort((a, b) => Number(b.task_type === "text2text") - Number(a.task_type === "text2text"));

/**
 * The "Connect a tool" view of a project: `keyId` preselects a key (and `secret` is its secret,
 * shown only when it was just made); `onClose` adds a Close button.
 */
export function ConnectTool({
  project,
  keyId,
  secret,
  onClose,
}: {
  project: string;
  keyId?: string;
  secret?: { keyId: string; value: string };
  onClose?(): void;
}) {
  const p = encodeURIComponent(project);
  const keys = useApi<Key[]>(`/admin/projects/${p}/keys`);
  const workloads = useApi<Workload[]>(`/admin/projects/${p}/workloads`);
  const listen = useListen();
  const [since] = useState(() => new Date().toISOString());
  const [tool, setTool] = useState(TOOLS[0].id);
  const [chosenKey, setKey] = useState(keyId ?? secret?.keyId);
  const [model, setModel] = useState<string>();
  const live = (keys.data ?? []).filter((k) => k.type === "live" && !k.revoked_at);
  const k = live.find((x) => x.id === chosenKey) ?? live[0];
  const ws = callable(workloads.data ?? []);
  const w = ws.find((x) => x.model_name === model) ?? ws[0];
  const origin = clientOrigin(listen);
  const value = k && secret?.keyId === k.id ? secret.value : k ? placeholder(k) : "<a live key of this project>";
  const target: ConnectTarget = { origin, project, key: value, model: w?.model_name ?? "<model name>", workload: w };
  const t = TOOLS.find((x) => x.id === tool) ?? TOOLS[0];
  const view = t.view(target);
  const pick = (set: (v: string) => void) => (e: Event) => set((e.target as HTMLSelectElement).value);
  // Opened from a button further down (a key's row), the view comes into sight.
  const box = useRef<HTMLElement>(null);
  useEffect(() => box.current?.scrollIntoView?.({ block: "nearest" }), []);
  return html`<section ref=${box} class="card connect-tool" aria-labelledby="connect-h" data-testid="connect-tool">
    <h2 id="connect-h">Connect a tool</h2>
    <div class="limit-grid">
      <label>Tool<select name="tool" value=${tool} onChange=${pick(setTool)}>
        ${TOOLS.map((x) => html`<option value=${x.id}>${x.label}</option>`)}</select></label>
      <label>Key<select name="connect_key" value=${k?.id ?? ""} onChange=${pick(setKey)} disabled=${live.length === 0}>
        ${live.map((x) => html`<option value=${x.id}>${x.name} (${x.prefix}…)</option>`)}</select></label>
      <label>Model<select name="connect_model" value=${w?.model_name ?? ""} onChange=${pick(setModel)} disabled=${ws.length === 0}>
        ${ws.map((x) => html`<option value=${x.model_name}>${x.model_name}</option>`)}</select></label>
    </div>
    ${keys.error ? html`<${ErrorNote} error=${keys.error} />` : null}
    ${!keys.data || !workloads.data ? html`<${Loading} />` : null}
    ${keys.data && live.length === 0 ? html`<p class="note warn" data-testid="connect-no-key">This project has no live key: create one under Keys, then connect.</p>` : null}
    ${
      k && secret?.keyId === k.id
        ? html`<p class="note" data-testid="connect-secret-note">The settings hold key <strong>${k.name}</strong>'s secret: it is shown only now, copy what you need.</p>`
        : k
          ? html`<p class="note" data-testid="connect-secret-note">Replace <code>${placeholder(k)}</code> with the secret of key <strong>${k.name}</strong> (<code>${k.prefix}…</code>): inferd showed it once, when the key was made, and does not keep it. Lost it? Make a new key.</p>`
          : null
    }
    ${ws.length === 0 && workloads.data ? html`<p class="muted">This project has no workload yet: <code>${"<model name>"}</code> stands for the model name of one.</p>` : null}
    <${ListenNote} listen=${listen} lan="Other machines on your network reach inferd at" />
    ${
      view.container
        ? html`<div class="note warn" role="note" data-testid="connect-docker-note">
        <p><strong>${t.label} usually runs in a container: there, 127.0.0.1 is the container itself, not this machine.</strong></p>
        <p>Use <code>host.docker.internal</code> (on Linux start the container with <code class="wrap">--add-host=host.docker.internal:host-gateway</code>, as below) or this machine's LAN address${listen?.url ? html` (<code>${listen.url}</code>)` : ""}, and let inferd listen beyond 127.0.0.1 for the container to reach it.</p>
      </div>`
        : null
    }
    ${view.steps ? html`<p data-testid="connect-steps">${view.steps}</p>` : null}
    <div class="snippets" data-testid="connect-settings">${view.blocks.map((b) => html`<${CodeBlock} label=${b.label} code=${b.code} />`)}</div>
    <${Watch} projectId=${k?.project_id} k=${k} since=${since} />
    ${onClose ? html`<div class="actions"><button type="button" onClick=${onClose}>Close</button></div>` : null}
  </section>`;
}

/** A "Connect a tool" button that opens the view in place (and closes it again). */
export function ConnectToolButton({
  project,
  keyId,
  secret,
  label = "Connect a tool",
}: {
  project: string;
  keyId?: string;
  secret?: { keyId: string; value: string };
  label?: string;
}) {
  const [open, setOpen] = useState(false);
  return open
    ? html`<${ConnectTool} project=${project} keyId=${keyId} secret=${secret} onClose=${() => setOpen(false)} />`
    : html`<button type="button" onClick=${() => setOpen(true)} data-testid="connect-tool-open">${label}</button>`;
}
