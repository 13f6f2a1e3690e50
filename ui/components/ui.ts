/** Small building blocks shared by the pages: notes, badges, copy buttons, secrets, confirm dialogs. */
import { html } from "htm/preact";
import type { ComponentChildren } from "preact";
import { useEffect, useId, useLayoutEffect, useRef, useState } from "preact/hooks";
import type { ApiError } from "../lib/api";

/** An error from the API (or any message) announced to screen readers, with the answer's request id when it had one. */
export function ErrorNote({ error }: { error?: ApiError | string | null }) {
  if (!error) return null;
  const text = typeof error === "string" ? error : error.message;
  const id = typeof error === "string" ? undefined : error.requestId;
  if (!id) return html`<p class="note error" role="alert">${text}</p>`;
  return html`<div class="note error" role="alert"><p class="flush">${text}</p><${RequestId} id=${id} /></div>`;
}

/** A data-plane answer's request id, to quote in a support request or find in the logs. */
export function RequestId({ id, inspect }: { id: string; inspect?: boolean }) {
  return html`<p class="request-id" data-testid="request-id">Request id: <samp>${id}</samp> <${CopyButton} text=${id} name="Copy the request id" />${inspect ? html` <a href=${`/requests/${encodeURIComponent(id)}`} data-testid="inspect-request">Open in the inspector</a>` : null}</p>`;
}

/** The id of the note that explains an error at `field` (for aria-describedby). */
const errorId = (field: string) => `error-${field.replace(/[^\w-]/g, "-")}`;

/** A sentence's first letter in upper case. */
const sentence = (text: string) => text.charAt(0).toUpperCase() + text.slice(1);

/**
 * The server's message in plain words, without the field's path the API puts in front (the form
 * shows it at the field, or names the field in words).
 * @example plainMessage(new ApiError(400, "validation_error", "config.command: the command has an unclosed double quote", "config.command")) // → "The command has an unclosed double quote"
 */
export function plainMessage(error: ApiError): string {
  const f = error.field;
  return sentence(f && error.message.startsWith(`${f}: `) ? error.message.slice(f.length + 2) : error.message);
}

/** A field's path in words: `execution_params.max_replicas` → "Max replicas". */
export const fieldWords = (field: string) =>
  sentence(
    (
      field
        .split(".")
        .filter((p) => !/^\d+$/.test(p))
        .pop() ?? field
    ).replace(/_/g, " "),
  );

/** The server's message for `field` when its error names that field (in plain words). */
export function messageAt(error: ApiError | undefined, field: string): string | undefined {
  if (!error?.field || error.field !== field) return undefined;
  return plainMessage(error);
}

/**
 * Attributes that mark a control invalid and point it at its error note, when the error names `field`.
 * @example html`<input ...${invalidAt(save.error, "name")} /><${FieldError} error=${save.error} field="name" />`
 */
export function invalidAt(error: ApiError | undefined, field: string): Record<string, unknown> {
  return messageAt(error, field) ? { "aria-invalid": "true", "aria-describedby": errorId(field) } : {};
}

/** The server's validation message shown at the field it names (`alert`: announced, where no other note is). */
export function FieldError({ error, field, alert }: { error?: ApiError; field: string; alert?: boolean }) {
  const text = messageAt(error, field);
  return text
    ? html`<small class="field-error" id=${errorId(field)} role=${alert ? "alert" : undefined}>${text}</small>`
    : null;
}

/**
 * A form's error that no field of the form shows (no field named, or one the form does not have),
 * as one summary at the top of the form; an error the form shows at its field moves focus there.
 * @example html`<form><${FormError} error=${save.error} />…fields with FieldError…</form>`
 */
export function FormError({ error }: { error?: ApiError | null }) {
  const box = useRef<HTMLDivElement>(null);
  const [atField, setAtField] = useState<boolean>(!!error?.field);
  useLayoutEffect(() => {
    const form = box.current?.closest("form");
    const note = error?.field ? form?.querySelector(`#${CSS.escape(errorId(error.field))}`) : null;
    setAtField(!!note);
    if (note) form?.querySelector<HTMLElement>(`[aria-describedby~="${note.id}"]`)?.focus();
  }, [error]);
  // A message that began with the field's path names the field in words instead.
  const named = !!error?.field && error.message.startsWith(`${error.field}: `);
  const text =
    !error || atField ? "" : named ? `${fieldWords(error.field!)}: ${plainMessage(error)}` : plainMessage(error);
  return html`<div class="form-summary" ref=${box}>${text ? html`<p class="note error" role="alert" data-testid="form-error">${text}</p>` : null}</div>`;
}

/** A replica or worker state as a coloured badge. */
export function StateBadge({ state }: { state: string }) {
  return html`<span class=${`badge state-${state}`}>${state}</span>`;
}

/** Copies text to the clipboard (also on plain-http LAN pages, where the Clipboard API is missing). */
export async function copyText(text: string): Promise<void> {
  if (navigator.clipboard && window.isSecureContext) {
    try {
      return await navigator.clipboard.writeText(text);
    } catch {}
  }
  const area = document.createElement("textarea");
  area.value = text;
  area.setAttribute("readonly", "");
  area.className = "offscreen";
  document.body.appendChild(area);
  area.select();
  document.execCommand("copy");
  area.remove();
}

/** A button that copies `text` and says so. */
export function CopyButton({ text, label = "Copy", name }: { text: string; label?: string; name?: string }) {
  const [done, setDone] = useState(false);
  useEffect(() => {
    if (!done) return;
    const t = setTimeout(() => setDone(false), 2000);
    return () => clearTimeout(t);
  }, [done]);
  const copy = async () => {
    await copyText(text);
    setDone(true);
  };
  return html`<button type="button" class="small" onClick=${copy} aria-label=${done ? "Copied" : name} aria-live="polite">${done ? "Copied" : label}</button>`;
}

/** Code to read and copy, e.g. a command or a snippet. */
export function CodeBlock({ code, label }: { code: string; label: string }) {
  return html`<figure class="code">
    <figcaption><span>${label}</span><${CopyButton} text=${code} name=${`Copy ${label}`} /></figcaption>
    <pre tabindex="0"><code>${code}</code></pre>
  </figure>`;
}

/** A secret shown once, right after it was made, with a copy button, a clear warning and what inferd keeps of it (`kept`; default: a hash). */
export function SecretOnce({
  secret,
  what,
  onDone,
  kept = "inferd keeps only a hash of it.",
}: {
  secret: string;
  what: string;
  onDone(): void;
  kept?: string;
}) {
  const id = useId();
  return html`<section class="secret" aria-labelledby=${id}>
    <h3 id=${id}>Your new ${what}</h3>
    <p class="warn"><strong>Copy it now: you will not see this again.</strong> ${kept}</p>
    <div class="secret-row"><code class="secret-value" data-testid="secret">${secret}</code><${CopyButton} text=${secret} label="Copy secret" /></div>
    <button type="button" onClick=${onDone}>I have copied it</button>
  </section>`;
}

/** A button that asks for confirmation in a modal dialog before running `onConfirm`. */
export function ConfirmButton(props: {
  label: string;
  title: string;
  body: ComponentChildren;
  confirm: string;
  onConfirm(): unknown;
  class?: string;
}) {
  const dialog = useRef<HTMLDialogElement>(null);
  const id = useId();
  const close = () => dialog.current?.close();
  const go = async () => {
    close();
    await props.onConfirm();
  };
  return html`<button type="button" class=${props.class ?? "danger"} onClick=${() => dialog.current?.showModal()}>${props.label}</button>
    <dialog ref=${dialog} aria-labelledby=${id}>
      <h2 id=${id}>${props.title}</h2>
      <div>${props.body}</div>
      <div class="actions">
        <button type="button" onClick=${close}>Cancel</button>
        <button type="button" class="danger" onClick=${go}>${props.confirm}</button>
      </div>
    </dialog>`;
}

/** A horizontal bar for a share of something (GPU utilisation, memory). */
export function Bar({ value, max, label, text }: { value: number; max: number; label: string; text: string }) {
  const pct = max > 0 ? Math.min(100, Math.max(0, (value / max) * 100)) : 0;
  return html`<div class="bar-row">
    <span class="bar-label">${label}</span>
    <div class="bar" role="meter" aria-label=${label} aria-valuemin="0" aria-valuemax=${max} aria-valuenow=${value} aria-valuetext=${text}>
      <div class=${`bar-fill ${pct > 85 ? "hot" : ""}`} style=${{ width: `${pct}%` }}></div>
    </div>
    <span class="bar-text">${text}</span>
  </div>`;
}

/** Links between the views of one thing, the current one marked. */
export function Tabs({ items, current }: { items: { href: string; label: string }[]; current: string }) {
  return html`<nav class="tabs" aria-label="Sections">
    ${items.map((i) => html`<a href=${i.href} aria-current=${i.href === current ? "page" : undefined}>${i.label}</a>`)}
  </nav>`;
}

/** The page heading (focused after navigation so screen readers announce the page). */
export function PageTitle({ children, sub }: { children: ComponentChildren; sub?: ComponentChildren }) {
  const ref = useRef<HTMLHeadingElement>(null);
  useEffect(() => {
    document.title = `${ref.current?.textContent ?? ""} · inferd`;
  });
  return html`<header class="page-head"><h1 ref=${ref} tabindex="-1">${children}</h1>${sub ? html`<p class="sub">${sub}</p>` : null}</header>`;
}

/** A placeholder while the first answer is on its way. */
export const Loading = () => html`<p class="muted" aria-busy="true">Loading…</p>`;
