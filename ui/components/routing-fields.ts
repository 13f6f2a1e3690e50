/**
 * How the project's base URL reaches a workload, in its form: aliases (other names clients may send
 * as `model`) and fallbacks (other workloads of the project, tried in order). The server's refusals
 * (`aliases.N`, `fallbacks.N`) are shown at the input they name.
 */
import { html } from "htm/preact";
import type { ApiError } from "../lib/api";
import { sentAliasIndex, type Draft } from "../lib/draft";
import { FieldError, invalidAt } from "./ui";

/** A workload another one may fall back to. */
export interface FallbackChoice {
  slug: string;
  name: string;
}

const val = (e: Event) => (e.target as HTMLInputElement).value;

/** `list` without its item `i`. */
const without = <T>(list: T[], i: number) => list.filter((_, j) => j !== i);

/** `list` with item `i` in place of the one before it. */
const movedUp = <T>(list: T[], i: number) => [...list.slice(0, i - 1), list[i], list[i - 1], ...list.slice(i + 1)];

/** The aliases: one input each, added and removed by buttons. */
function Aliases({ d, set, error }: { d: Draft; set(p: Partial<Draft>): void; error?: ApiError }) {
  const change = (i: number, v: string) => set({ aliases: d.aliases.map((a, j) => (j === i ? v : a)) });
  return html`<div class="list-group" role="group" aria-labelledby="aliases-h">
    <p class="group-label" id="aliases-h">Aliases</p>
    <small class="muted">Other names clients may send as <code>model</code> on the project's base URL (e.g. <code>gpt-4o</code> for a tool that insists on one); unique in the project.</small>
    ${
      d.aliases.length
        ? html`<ul class="list-field">${d.aliases.map((a, i) => {
            const field = `aliases.${sentAliasIndex(d.aliases, i)}`;
            return html`<li>
        <input name=${`alias-${i}`} aria-label=${`Alias ${i + 1}`} value=${a} spellcheck=${false} onInput=${(e: Event) => change(i, val(e))} ...${invalidAt(error, field)} />
        <button type="button" class="small" aria-label=${`Remove alias ${i + 1}`} onClick=${() => set({ aliases: without(d.aliases, i) })}>Remove</button>
        <${FieldError} error=${error} field=${field} /></li>`;
          })}</ul>`
        : null
    }
    <button type="button" class="small" onClick=${() => set({ aliases: [...d.aliases, ""] })}>Add alias</button>
  </div>`;
}

/** The fallbacks: one choice of another workload each, in the order they are tried. */
function Fallbacks({
  d,
  set,
  error,
  others: loaded,
}: {
  d: Draft;
  set(p: Partial<Draft>): void;
  error?: ApiError;
  others?: FallbackChoice[];
}) {
  const others = loaded ?? [];
  const free = others.filter((o) => !d.fallbacks.includes(o.slug));
  const change = (i: number, slug: string) => set({ fallbacks: d.fallbacks.map((f, j) => (j === i ? slug : f)) });
  return html`<div class="list-group" role="group" aria-labelledby="fallbacks-h">
    <p class="group-label" id="fallbacks-h">Fallbacks</p>
    <small class="muted">Tried in this order when this workload fails before answering (5xx, unavailable, queue full or timed out) on the project's base URL; never once the answer has begun.</small>
    ${
      d.fallbacks.length
        ? html`<ol class="list-field">${d.fallbacks.map((slug, i) => {
            const field = `fallbacks.${i}`;
            const known = others.some((o) => o.slug === slug);
            const options = [
              ...others.filter((o) => o.slug === slug || !d.fallbacks.includes(o.slug)),
              ...(known ? [] : [{ slug, name: loaded ? "not in this project" : slug }]),
            ];
            return html`<li>
        <select name=${`fallback-${i}`} aria-label=${`Fallback ${i + 1}`} value=${slug} onChange=${(e: Event) => change(i, val(e))} ...${invalidAt(error, field)}>
          ${options.map((o) => html`<option value=${o.slug}>${o.name} (${o.slug})</option>`)}
        </select>
        ${i > 0 ? html`<button type="button" class="small" aria-label=${`Move fallback ${i + 1} up`} onClick=${() => set({ fallbacks: movedUp(d.fallbacks, i) })}>Up</button>` : null}
        <button type="button" class="small" aria-label=${`Remove fallback ${i + 1}`} onClick=${() => set({ fallbacks: without(d.fallbacks, i) })}>Remove</button>
        <${FieldError} error=${error} field=${field} /></li>`;
          })}</ol>`
        : null
    }
    ${
      !loaded
        ? null
        : others.length
          ? html`<button type="button" class="small" disabled=${!free.length} onClick=${() => set({ fallbacks: [...d.fallbacks, free[0].slug] })}>Add fallback</button>`
          : html`<p class="muted small-text">No other workload in this project to fall back to yet.</p>`
    }
  </div>`;
}

/** Task types routed by prefix when no routing is set (the server's CHAT_TASK_TYPES). */
const CHAT_TASKS = ["text2text", "image2text"];

/** How requests are spread over the workload's replicas: by prompt prefix, to the least-loaded one, or the task type's default. */
export function ReplicaRouting({ d, set, error }: { d: Draft; set(p: Partial<Draft>): void; error?: ApiError }) {
  const byDefault = CHAT_TASKS.includes(d.task_type) ? "by prompt prefix" : "least loaded";
  return html`<label>Between replicas
    <select name="routing" value=${d.routing} onChange=${(e: Event) => set({ routing: val(e) })} ...${invalidAt(error, "routing")}>
      <option value="">Default: ${byDefault}</option>
      <option value="prefix">By prompt prefix</option>
      <option value="least_loaded">Least loaded</option>
    </select>
    <small class="muted">By prompt prefix, the turns of one conversation go to the replica that already holds its prompt (faster first token); a busy replica hands them on.</small>
    <${FieldError} error=${error} field="routing" /></label>`;
}

/** Aliases and fallbacks of a workload; `others` are the project's other workloads (undefined while they load). */
export function RoutingFields({
  d,
  set,
  error,
  others,
}: {
  d: Draft;
  set(p: Partial<Draft>): void;
  error?: ApiError;
  others?: FallbackChoice[];
}) {
  return html`<fieldset class="routing">
    <legend>On the project's base URL</legend>
    <p class="muted small-text">Clients of the project's base URL reach this workload by its model name, its slug or an alias.</p>
    <${Aliases} d=${d} set=${set} error=${error} />
    <${Fallbacks} d=${d} set=${set} error=${error} others=${others} />
  </fieldset>`;
}
