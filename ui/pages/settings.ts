/**
 * Settings: every setting in force with its flag, environment variable and where its value comes
 * from; the ones that can change while serving come first and are changed here (stored, beating the
 * flag, until Reset; read-only for a role that cannot save), the others are folded and say how to
 * restart with them.
 */
import { html } from "htm/preact";
import { useState } from "preact/hooks";
import { api } from "../lib/api";
import { useAction, useApi } from "../lib/hooks";
import { ago } from "../lib/format";
import type { SettingView } from "../../src/settings/service";
import { ErrorNote, FieldError, invalidAt, Loading, PageTitle } from "../components/ui";
import { Can, guard } from "../lib/me";

/** What `GET /admin/settings` answers. */
type Settings = { command: string; settings: SettingView[] };

/** The runtime settings' names in words (the others are shown by their flag). */
const LABELS: Record<string, string> = {
  hfToken: "Hugging Face token",
  allowPrivateWebhooks: "Private webhooks",
  webhookRetrySchedule: "Webhook retry schedule",
  defaultKeyLimits: "Default key limits",
  logLevel: "Log level",
};

/** Where a value comes from, in words. */
const SOURCES: Record<string, string> = {
  flag: "from the flag",
  env: "from the environment",
  default: "default",
  dashboard: "set here",
};

/** A value as text (on/off, lists comma-separated, none as "none"). */
const text = (v: unknown) =>
  typeof v === "boolean"
    ? v
      ? "on"
      : "off"
    : Array.isArray(v)
      ? v.join(",") || "none"
      : v === null || v === undefined || v === ""
        ? "none"
        : String(v);

/** The flag and environment variable of a setting. */
const Names = ({ s }: { s: SettingView }) =>
  html`<span class="setting-names"><code>${s.flag}</code> <code>${s.env}</code></span>`;

/** The control that edits one runtime setting. */
function Control({
  s,
  value,
  onInput,
  attrs,
}: {
  s: SettingView;
  value: string;
  onInput(v: string): void;
  attrs: Record<string, unknown>;
}) {
  const id = `setting-${s.key}`;
  const set = (e: Event) => onInput((e.target as HTMLInputElement).value);
  if (s.kind === "bool")
    return html`<label class="check"><input id=${id} type="checkbox" ...${attrs} checked=${value === "true"} onChange=${(e: Event) => onInput(String((e.target as HTMLInputElement).checked))} /> ${LABELS[s.key] ?? s.flag} on</label>`;
  if (s.key === "logLevel")
    return html`<label>New value<select id=${id} aria-label=${LABELS[s.key]} ...${attrs} value=${value} onChange=${set}>${["error", "warn", "info", "debug"].map((l) => html`<option value=${l}>${l}</option>`)}</select></label>`;
  return html`<label>New value<input id=${id} aria-label=${LABELS[s.key] ?? s.flag} ...${attrs} type=${s.secret ? "password" : "text"} autocomplete="off" value=${value} onInput=${set}
    placeholder=${s.secret ? (s.value === "set" ? "set (type a new one to replace it)" : "not set") : ""} /></label>`;
}

/** One setting that can change while serving: its value in force, a control, Save and Reset. */
function RuntimeSetting({ s, onSaved }: { s: SettingView; onSaved(): void }) {
  const initial = s.secret ? "" : Array.isArray(s.value) ? s.value.join(",") : String(s.value ?? "");
  const [value, setValue] = useState(initial);
  const save = useAction((v: unknown) => api("/admin/settings", { method: "PATCH", body: { [s.key]: v } }));
  const submit = async (e: Event) => {
    e.preventDefault();
    if (await save.run(s.kind === "bool" ? value === "true" : value)) onSaved();
  };
  const reset = async () => {
    if (await save.run(null)) onSaved();
  };
  const changed = value !== initial;
  return html`<li class="card setting" data-testid=${`setting-${s.key}`}>
    <form class="form" onSubmit=${submit} aria-label=${LABELS[s.key] ?? s.flag}>
      <div class="setting-head"><h3>${LABELS[s.key] ?? s.flag}</h3><${Names} s=${s} /></div>
      <p class="muted">${s.description}</p>
      <p class="setting-now">In force: <strong data-testid="value">${text(s.value)}</strong> <span class=${`badge source-${s.source}`}>${SOURCES[s.source]}</span>
        ${s.source === "dashboard" && s.updated_at ? html` <span class="muted">by ${s.updated_by ?? "?"}, ${ago(s.updated_at)}</span>` : null}</p>
      <${Control} s=${s} value=${value} onInput=${setValue} attrs=${{ ...invalidAt(save.error, s.key), ...guard("settings.change") }} />
      <${FieldError} error=${save.error} field=${s.key} alert />
      ${save.error && save.error.field !== s.key ? html`<${ErrorNote} error=${save.error} />` : null}
      <div class="actions">
        <button type="submit" class="primary" disabled=${save.busy || !changed} ...${guard("settings.change")}>Save</button>
        ${s.source === "dashboard" ? html`<button type="button" onClick=${reset} disabled=${save.busy} ...${guard("settings.change")} title="Forget the value set here: the flag, environment or default applies again">Reset</button>` : null}
      </div>
    </form>
  </li>`;
}

/** One setting that needs a restart: shown with how to pass it. */
function RestartSetting({ s, command }: { s: SettingView; command: string }) {
  return html`<li class="setting-ro" data-testid=${`setting-${s.key}`}>
    <div class="setting-head"><${Names} s=${s} /><span class=${`badge source-${s.source}`}>${SOURCES[s.source]}</span></div>
    <div class="setting-value"><code class="wrap" data-testid="value">${text(s.value)}</code></div>
    <p class="muted">${s.description}</p>
    <p class="muted small-text">Restart with <code class="wrap">${command} serve ${s.flag}${s.kind === "bool" ? "" : " …"}</code> or set <code>${s.env}</code>.</p>
  </li>`;
}

/** How many of these settings come from a flag or the environment rather than their default. */
const changedCount = (list: SettingView[]) => list.filter((s) => s.source !== "default").length;

/** The Settings page: the settings that change while serving first, those read at start folded. */
export function SettingsPage() {
  const list = useApi<Settings>("/admin/settings");
  if (list.error) return html`<${ErrorNote} error=${list.error} />`;
  if (!list.data) return html`<${Loading} />`;
  const { command, settings } = list.data;
  const runtime = settings.filter((s) => s.runtime);
  const fixed = settings.filter((s) => !s.runtime);
  return html`<${PageTitle} sub="Every setting in force, with its flag and environment variable.">Settings<//>
    <section aria-labelledby="now"><h2 id="now">Change while serving</h2>
      <${Can} do="settings.change" note><//>
      <p class="muted">A value saved here is kept in the store and beats the flag, environment and default, on every host, from the next request on; Reset returns to them. Each change is in the audit log.</p>
      <ul class="settings">${runtime.map((s) => html`<${RuntimeSetting} key=${`${s.key}:${s.source}:${s.updated_at}`} s=${s} onSaved=${() => list.reload()} />`)}</ul>
    </section>
    <section aria-labelledby="restart"><h2 id="restart">Need a restart</h2>
      <p class="muted">These are read when inferd starts: pass the flag (or set the environment variable) and restart, e.g. <code>${command} serve --port 8420</code>.</p>
      <details class="settings-fixed" data-testid="restart-settings"><summary>Show the ${fixed.length} settings read at start${changedCount(fixed) ? ` (${changedCount(fixed)} not at their default)` : ""}</summary>
        <ul class="settings-ro">${fixed.map((s) => html`<${RestartSetting} key=${s.key} s=${s} command=${command} />`)}</ul>
      </details>
    </section>`;
}
