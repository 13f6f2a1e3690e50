/** Per-key limits and per-project token quotas: a summary in words and a form that edits them. */
import { html } from "htm/preact";
import { useId, useRef, useState } from "preact/hooks";
import { api } from "../lib/api";
import { useAction } from "../lib/hooks";
import { count } from "../lib/format";
import type { LimitsView } from "../lib/types";
import { ErrorNote, FieldError, invalidAt } from "./ui";

type Field = keyof LimitsView;

/** Every limit with its label and how a summary says it. */
const FIELDS: { id: Field; label: string; hint: string; short: string }[] = [
  { id: "rpm", label: "Requests per minute", hint: "Bursts up to this many, refilled evenly.", short: "req/min" },
  { id: "tpm", label: "Tokens per minute", hint: "Input and output tokens together.", short: "tokens/min" },
  { id: "max_concurrent", label: "Requests at once", hint: "More wait for none: they get 429.", short: "at once" },
  { id: "tokens_per_day", label: "Tokens per day", hint: "A quota per UTC day, kept across restarts.", short: "tokens/day" },
  { id: "tokens_per_month", label: "Tokens per month", hint: "A quota per calendar month (UTC).", short: "tokens/month" },
];

/** The quotas a project has (every key of it together). */
export const QUOTA_FIELDS: Field[] = ["tokens_per_day", "tokens_per_month"];

/**
 * The limits that are set, in a few words.
 * @example limitsText({ rpm: 60, tokens_per_day: 100000 }) // → "60 req/min · 100,000 tokens/day"
 */
export function limitsText(l: Partial<LimitsView> | undefined): string {
  const set = FIELDS.filter((f) => l?.[f.id] != null).map((f) => `${count(l![f.id]!)} ${f.short}`);
  return set.length ? set.join(" · ") : "no limits";
}

/** The form's text for each field ("" when unset). */
const texts = (l: Partial<LimitsView>, fields: Field[]) => Object.fromEntries(fields.map((f) => [f, l[f] == null ? "" : String(l[f])])) as Record<Field, string>;

/**
 * A form for some limits: empty means no limit. Sends `{limits}` (each field a number or null) to
 * `path` with PATCH and hands the answer to `onSaved`; the server's refusals show at their field.
 */
export function LimitsForm({ path, limits, fields, onSaved, onCancel }: { path: string; limits: Partial<LimitsView>; fields: Field[]; onSaved(): unknown; onCancel?(): void }) {
  const [vals, setVals] = useState(() => texts(limits, fields));
  const save = useAction((body: unknown) => api(path, { method: "PATCH", body }));
  const bad = fields.find((f) => vals[f].trim() !== "" && !/^\d+$/.test(vals[f].trim()));
  const submit = async (e: Event) => {
    e.preventDefault();
    const out = Object.fromEntries(fields.map((f) => [f, vals[f].trim() === "" ? null : Number(vals[f].trim())]));
    if ((await save.run({ limits: out })) !== undefined) await onSaved();
  };
  const shown = new Set(fields.map((f) => `limits.${f}`));
  return html`<form class="form limits-form" onSubmit=${submit} aria-label="Limits">
    <div class="limit-grid">
      ${FIELDS.filter((f) => fields.includes(f.id)).map((f) => html`<label>${f.label}
        <input name=${f.id} inputmode="numeric" pattern="[0-9]*" placeholder="no limit" value=${vals[f.id]}
          onInput=${(e: Event) => setVals({ ...vals, [f.id]: (e.target as HTMLInputElement).value })} ...${invalidAt(save.error, `limits.${f.id}`)} />
        <small class="muted">${f.hint}</small>
        <${FieldError} error=${save.error} field=${`limits.${f.id}`} alert />
      </label>`)}
    </div>
    ${bad ? html`<p class="note error" role="alert">${FIELDS.find((f) => f.id === bad)!.label}: a whole number, or empty for no limit.</p>` : null}
    ${save.error && !(save.error.field && shown.has(save.error.field)) ? html`<${ErrorNote} error=${save.error} />` : null}
    <div class="actions">
      ${onCancel ? html`<button type="button" onClick=${onCancel}>Cancel</button>` : null}
      <button type="submit" class="primary" disabled=${save.busy || !!bad}>Save limits</button>
    </div>
  </form>`;
}

/** A key's limits in words with an Edit button that opens the form in a dialog. */
export function KeyLimitsCell({ keyId, name, limits, onSaved }: { keyId: string; name: string; limits: LimitsView; onSaved(): unknown }) {
  const dialog = useRef<HTMLDialogElement>(null);
  const [open, setOpen] = useState(0);
  const id = useId();
  const close = () => dialog.current?.close();
  return html`<span class="limits-text">${limitsText(limits)}</span>
    <button type="button" class="small" aria-label=${`Edit limits of ${name}`} onClick=${() => {
      setOpen(open + 1);
      dialog.current?.showModal();
    }}>Edit limits</button>
    <dialog ref=${dialog} aria-labelledby=${id} class="limits-dialog">
      <h2 id=${id}>Limits of ${name}</h2>
      <p class="muted">Over a limit, requests get 429 with <code>Retry-After</code> and the <code>x-ratelimit-*</code> headers OpenAI clients read. Changes apply from the next request.</p>
      ${open ? html`<${LimitsForm} key=${open} path=${`/admin/keys/${keyId}`} limits=${limits} fields=${FIELDS.map((f) => f.id)} onCancel=${close}
        onSaved=${async () => {
          close();
          await onSaved();
        }} />` : null}
    </dialog>`;
}
