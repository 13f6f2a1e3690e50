/** Per-key limits, per-project token quotas and caps: a summary in words and a form that edits them. */
import { html } from "htm/preact";
import { useEffect, useId, useRef, useState } from "preact/hooks";
import { api } from "../lib/api";
import { useAction } from "../lib/hooks";
import { count } from "../lib/format";
import type { Info, LimitsView, ProjectLimitsView } from "../lib/types";
import { ErrorNote, FieldError, invalidAt } from "./ui";

type Field = keyof LimitsView | keyof ProjectLimitsView;
type Limits = Partial<Record<Field, number | string | null>>;

const MiB = 1048576;

/**
 * Every limit with its label, how a summary says it, and the unit the form takes it in (bytes as MiB);
 * `choices` make a select (empty: the default), `empty` is what an empty field means.
 */
const FIELDS: {
  id: Field;
  label: string;
  hint: string;
  short: string;
  unit?: number;
  choices?: [string, string][];
  empty?: string;
  say?: (v: number | string) => string;
}[] = [
  { id: "rpm", label: "Requests per minute", hint: "Bursts up to this many, refilled evenly.", short: "req/min" },
  { id: "tpm", label: "Tokens per minute", hint: "Input and output tokens together.", short: "tokens/min" },
  { id: "max_concurrent", label: "Requests at once", hint: "More wait for none: they get 429.", short: "at once" },
  {
    id: "tokens_per_day",
    label: "Tokens per day",
    hint: "A quota per UTC day, kept across restarts.",
    short: "tokens/day",
  },
  {
    id: "tokens_per_month",
    label: "Tokens per month",
    hint: "A quota per calendar month (UTC).",
    short: "tokens/month",
  },
  {
    id: "priority",
    label: "Priority",
    hint: "Batch: its requests wait behind interactive ones, as jobs do.",
    short: "priority",
    choices: [
      ["", "Interactive (default)"],
      ["batch", "Batch"],
    ],
    say: (v) => `${v} priority`,
  },
  {
    id: "weight",
    label: "Share when busy",
    hint: "Its weight (1–1000) against other keys waiting for the same workload.",
    short: "weight",
    empty: "1",
    say: (v) => `weight ${v}`,
  },
  { id: "max_workloads", label: "Workloads", hint: "Creating one more is refused (429).", short: "workloads" },
  {
    id: "max_replicas",
    label: "Replicas",
    hint: "All its workloads' policies together; no more start.",
    short: "replicas",
  },
  {
    id: "model_bytes",
    label: "Model storage (MiB)",
    hint: "Models pulled for its workloads.",
    short: "MiB of models",
    unit: MiB,
  },
];

/** The limits a key has. */
const KEY_FIELDS: Field[] = [
  "rpm",
  "tpm",
  "max_concurrent",
  "tokens_per_day",
  "tokens_per_month",
  "priority",
  "weight",
];

/** The quotas a project has (every key of it together). */
export const QUOTA_FIELDS: Field[] = ["tokens_per_day", "tokens_per_month"];

/** The caps a project has: workloads, replicas, bytes of models pulled for it. */
export const CAP_FIELDS: Field[] = ["max_workloads", "max_replicas", "model_bytes"];

/** A limit's value in the unit its field takes (MiB for bytes). */
const inUnit = (f: Field, v: number | string) =>
  typeof v === "number" ? v / (FIELDS.find((x) => x.id === f)?.unit ?? 1) : v;

/**
 * The limits that are set, in a few words.
 * @example limitsText({ rpm: 60, tokens_per_day: 100000 }) // → "60 req/min · 100,000 tokens/day"
 */
export function limitsText(l: Limits | undefined): string {
  const set = FIELDS.filter((f) => l?.[f.id] != null).map((f) =>
    f.say ? f.say(l![f.id]!) : `${count(inUnit(f.id, l![f.id]!) as number)} ${f.short}`,
  );
  return set.length ? set.join(" · ") : "no limits";
}

/** Default key limits by field (`GET /admin/info` → default_key_limits). */
type Defaults = Partial<Record<Field, number>>;

let defaultsOnce: Promise<Defaults> | undefined;

/** The server's default key limits, read once per page load ({} until known or when unreadable). */
export function useKeyDefaults(): Defaults {
  const [d, setD] = useState<Defaults>({});
  useEffect(() => {
    defaultsOnce ??= api<Info>("/admin/info").then(
      (i) => (i.default_key_limits ?? {}) as Defaults,
      () => ((defaultsOnce = undefined), {}),
    );
    let live = true;
    void defaultsOnce.then((x) => live && setD(x));
    return () => void (live = false);
  }, []);
  return d;
}

/**
 * The limits a key really gets: its own, and the server's default where it has none of that kind
 * (marked "default"), as the limiter applies them.
 * @example effectiveLimits({ rpm: null, tpm: 5000 }, { rpm: 100 }) // → [["5,000 tokens/min", false], ["100 req/min", true]]
 */
export function effectiveLimits(own: Limits | undefined, defaults: Defaults): [string, boolean][] {
  const say = (f: (typeof FIELDS)[number], v: number | string) =>
    f.say ? f.say(v) : `${count(inUnit(f.id, v) as number)} ${f.short}`;
  return FIELDS.flatMap((f): [string, boolean][] => {
    if (own?.[f.id] != null) return [[say(f, own[f.id]!), false]];
    const d = defaults[f.id];
    return d != null ? [[say(f, d), true]] : [];
  });
}

/** A key's limits in force: its own, and the server's defaults where it has none (each marked "default"). */
export function KeyLimitsText({ limits }: { limits: LimitsView }) {
  const items = effectiveLimits(limits, useKeyDefaults());
  if (!items.length) return html`<span class="limits-text" data-testid="key-limits">no limits</span>`;
  const fromDefault = items.some(([, d]) => d);
  return html`<span class="limits-text" data-testid="key-limits" title=${fromDefault ? "Limits marked default come from the server's default key limits (Settings → Default key limits, --default-key-limits): they apply to every key without a limit of that kind of its own." : undefined}>${items.map(
    ([text, d], i) =>
      html`${i ? " · " : ""}${text}${d ? html` <span class="muted limit-default">(default)</span>` : null}`,
  )}</span>`;
}

/** The form's text for each field ("" when unset); a MiB value keeps every digit, so saving it unchanged keeps the bytes. */
const texts = (l: Limits, fields: Field[]) =>
  Object.fromEntries(
    fields.map((f) => [f, l[f] == null || l[f] === "interactive" ? "" : String(inUnit(f, l[f]!))]),
  ) as Record<Field, string>;

/** Whether a field's text is a value it takes: one of its choices, a whole number, or a decimal for a field in MiB. */
function wellFormed(f: Field, text: string): boolean {
  const spec = FIELDS.find((x) => x.id === f);
  if (spec?.choices) return spec.choices.some(([v]) => v === text);
  return (spec?.unit ? /^\d+(\.\d+)?$/ : /^\d+$/).test(text);
}

/** A field's text as the API takes it: null when empty, the choice as is, else a number in its unit. */
function valueOf(f: Field, text: string): number | string | null {
  const spec = FIELDS.find((x) => x.id === f);
  if (text === "") return null;
  return spec?.choices ? text : Math.round(Number(text) * (spec?.unit ?? 1));
}

/**
 * A form for some limits: empty means no limit. Sends `{limits}` (each field a number or null) to
 * `path` with PATCH and hands the answer to `onSaved`; the server's refusals show at their field.
 */
export function LimitsForm({
  path,
  limits,
  fields,
  onSaved,
  onCancel,
  label = "Limits",
  defaults = {},
}: {
  path: string;
  limits: Limits;
  fields: Field[];
  onSaved(): unknown;
  onCancel?(): void;
  label?: string;
  /** The server's defaults, shown in an empty field (a key's limits). */
  defaults?: Defaults;
}) {
  const [vals, setVals] = useState(() => texts(limits, fields));
  const save = useAction((body: unknown) => api(path, { method: "PATCH", body }));
  const bad = fields.find((f) => vals[f].trim() !== "" && !wellFormed(f, vals[f].trim()));
  const submit = async (e: Event) => {
    e.preventDefault();
    const out = Object.fromEntries(fields.map((f) => [f, valueOf(f, vals[f].trim())]));
    if ((await save.run({ limits: out })) !== undefined) await onSaved();
  };
  const shown = new Set(fields.map((f) => `limits.${f}`));
  return html`<form class="form limits-form" onSubmit=${submit} aria-label=${label}>
    <div class="limit-grid">
      ${FIELDS.filter((f) => fields.includes(f.id)).map(
        (f) => html`<label>${f.label}
        ${
          f.choices
            ? html`<select name=${f.id} value=${vals[f.id]} onChange=${(e: Event) => setVals({ ...vals, [f.id]: (e.target as HTMLSelectElement).value })} ...${invalidAt(save.error, `limits.${f.id}`)}>
              ${f.choices.map(([v, text]) => html`<option value=${v}>${text}</option>`)}
            </select>`
            : html`<input name=${f.id} inputmode=${f.unit ? "decimal" : "numeric"} pattern=${f.unit ? "[0-9]+([.][0-9]+)?" : "[0-9]*"} placeholder=${defaults[f.id] != null ? `default: ${inUnit(f.id, defaults[f.id]!)}` : (f.empty ?? "no limit")} value=${vals[f.id]}
          onInput=${(e: Event) => setVals({ ...vals, [f.id]: (e.target as HTMLInputElement).value })} ...${invalidAt(save.error, `limits.${f.id}`)} />`
        }
        <small class="muted">${f.hint}</small>
        <${FieldError} error=${save.error} field=${`limits.${f.id}`} alert />
      </label>`,
      )}
    </div>
    ${bad ? html`<p class="note error" role="alert">${FIELDS.find((f) => f.id === bad)!.label}: ${FIELDS.find((f) => f.id === bad)!.unit ? "a number" : "a whole number"}, or empty for no limit.</p>` : null}
    ${save.error && !(save.error.field && shown.has(save.error.field)) ? html`<${ErrorNote} error=${save.error} />` : null}
    <div class="actions">
      ${onCancel ? html`<button type="button" onClick=${onCancel}>Cancel</button>` : null}
      <button type="submit" class="primary" disabled=${save.busy || !!bad}>${label === "Limits" ? "Save limits" : `Save ${label.toLowerCase()}`}</button>
    </div>
  </form>`;
}

/** A key's limits in words with an Edit button that opens the form in a dialog. */
export function KeyLimitsCell({
  keyId,
  name,
  limits,
  onSaved,
}: {
  keyId: string;
  name: string;
  limits: LimitsView;
  onSaved(): unknown;
}) {
  const dialog = useRef<HTMLDialogElement>(null);
  const [open, setOpen] = useState(0);
  const id = useId();
  const close = () => dialog.current?.close();
  const defaults = useKeyDefaults();
  return html`<${KeyLimitsText} limits=${limits} />
    <button type="button" class="small" aria-label=${`Edit limits of ${name}`} onClick=${() => {
      setOpen(open + 1);
      dialog.current?.showModal();
    }}>Edit limits</button>
    <dialog ref=${dialog} aria-labelledby=${id} class="limits-dialog">
      <h2 id=${id}>Limits of ${name}</h2>
      <p class="muted">Over a limit, requests get 429 with <code>Retry-After</code> and the <code>x-ratelimit-*</code> headers OpenAI clients read. When a workload is busy, its waiting requests are shared between keys by weight. Changes apply from the next request.${Object.keys(defaults).length ? " An empty field takes the server's default key limit shown in it." : ""}</p>
      ${
        open
          ? html`<${LimitsForm} key=${open} path=${`/admin/keys/${keyId}`} limits=${limits} fields=${KEY_FIELDS} defaults=${defaults} onCancel=${close}
        onSaved=${async () => {
          close();
          await onSaved();
        }} />`
          : null
      }
    </dialog>`;
}
