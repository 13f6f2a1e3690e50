/** The final launch command of a workload draft, as the server previews it, and what the agent adds. */
import { html } from "htm/preact";
import type { ApiError } from "../lib/api";
import { useDebouncedApi } from "../lib/hooks";
import { configOf, sentModelName, type Draft } from "../lib/draft";
import type { LaunchPreview } from "../lib/types";
import { plainMessage } from "./ui";
import { can } from "../lib/me";

/** Asks the server for the command the agent would run, a moment after the user stops typing. */
export function useLaunchPreview(d: Draft): { preview?: LaunchPreview; error?: ApiError } {
  const config = configOf(d);
  const body = { backend: d.backend, model_name: sentModelName(d), config };
  // A viewer may not ask (operators and admins only): no preview rather than a refusal per keystroke.
  const ready = !!body.model_name && (d.backend === "ollama" || !!config.command) && can("workload.change");
  const { data, error } = useDebouncedApi<LaunchPreview>(
    ready ? "/admin/launch-preview" : null,
    { body },
    JSON.stringify(body),
  );
  return { preview: data, error };
}

/**
 * The final launch command of a draft and what the agent adds to it, in words. A refusal that names
 * one of `shownFields` is left to that field's note; any other is shown here.
 */
export function PreviewView({
  preview,
  error,
  shownFields,
}: {
  preview?: LaunchPreview;
  error?: ApiError;
  shownFields: string[];
}) {
  if (error)
    return error.field && shownFields.includes(error.field)
      ? null
      : html`<p class="note error" role="alert" data-testid="preview-error">${plainMessage(error)}</p>`;
  if (!preview) return null;
  const notes = [
    preview.port_added && "--host 127.0.0.1 --port <free port> are added (inferd picks the port)",
    preview.tp_added && "--tensor-parallel-size is set to the replica's GPU count",
    preview.builtin && "llama-server is not installed here: inferd's built-in llama.cpp runtime serves these flags",
  ].filter(Boolean);
  return html`<div class="preview" aria-live="polite">
    <span class="label">The agent will run</span>
    <pre data-testid="launch-command"><code>${preview.command}</code></pre>
    ${notes.length ? html`<ul class="muted">${notes.map((n) => html`<li>${n}</li>`)}</ul>` : null}
    ${
      preview.tenant.applies
        ? html`<p class=${`note ${preview.tenant.allowed ? "ok" : "warn"}`} data-testid="launch-policy">${
            preview.tenant.allowed
              ? "Launch policy: operators and a project's control-plane key could save this command too."
              : can("users")
                ? html`Launch policy: only an admin can save this; operators and a project's control-plane key would be refused — ${preview.tenant.violation?.message}`
                : html`Launch policy: only an admin can save this command — ${preview.tenant.violation?.message}`
          }</p>`
        : null
    }
  </div>`;
}

/** The launch preview of a draft whose form shows no field errors of its own: refusals are shown here. */
export function PreviewBox({ d }: { d: Draft }) {
  const { preview, error } = useLaunchPreview(d);
  return html`<${PreviewView} preview=${preview} error=${error} shownFields=${[]} />`;
}
