/** The request inspector's capture switch: keep a workload's request and answer bodies for a while, or stop. */
import { html } from "htm/preact";
import { api } from "../lib/api";
import { useAction, useNow } from "../lib/hooks";
import { duration } from "../lib/format";
import type { Workload } from "../lib/types";
import { ErrorNote } from "./ui";
import { useMe } from "../lib/me";

/** The lengths offered, in minutes. */
const CHOICES: [number, string][] = [
  [15, "15 min"],
  [60, "1 h"],
  [24 * 60, "24 h"],
];

/** Whether bodies are kept now, and until when, with buttons to start or stop. */
export function CaptureControl({ w, onChange }: { w: Workload; onChange(): void }) {
  const now = useNow(5000);
  const set = useAction(async (until: string | null) => {
    await api(`/admin/workloads/${w.id}`, { method: "PATCH", body: { capture_until: until } });
    onChange();
  });
  const until = w.capture_until && Date.parse(w.capture_until) > now ? w.capture_until : null;
  return html`<section class="card capture" aria-labelledby="capture-title">
    <h2 id="capture-title">Request bodies</h2>
    ${
      until
        ? html`<p role="status" data-testid="capture-state"><strong>Capturing</strong> request and answer bodies until <time datetime=${until}>${new Date(until).toLocaleString()}</time> (${duration((Date.parse(until) - now) / 1000)} left).</p>
        <div class="actions capture-actions"><button type="button" class="danger" disabled=${set.busy} onClick=${() => set.run(null)}>Stop capturing</button></div>`
        : html`<p role="status" data-testid="capture-state">Bodies are not kept: the list below holds each request's figures and timeline only.</p>
        <div class="actions capture-actions">${CHOICES.map(([min, label]) => html`<button type="button" disabled=${set.busy} onClick=${() => set.run(new Date(Date.now() + min * 60_000).toISOString())}>Keep bodies for ${label}</button>`)}</div>`
    }
    <p class="muted small-text">Captured bodies are the prompts, files and answers as sent: they may hold personal data. They are kept as long as finished jobs are (the job retention, <code>--job-retention-hours</code>) and then deleted; only operators and admins can read them.</p>
    <${ErrorNote} error=${set.error} />
  </section>`;
}

/**
 * What a role that may not read captured bodies (a viewer) is told in their place: who can, and what
 * it sees instead (never that it "can change" something: reading is what is refused).
 */
export function BodiesNotForRole() {
  const role = useMe()?.role ?? "viewer";
  return html`<p class="note role-note" data-testid="bodies-role-note">Captured bodies hold the prompts and answers as sent, so only operators and admins of this project can read them. Your role (${role}) sees each request's figures and timeline.</p>`;
}
