/** The execution policy part of the workload form: fixed, autoscaling or scheduled, with its parameters. */
import { html } from "htm/preact";
import type { ApiError } from "../lib/api";
import { DAYS, newWindow, POLICIES, type PolicyDraft, type WindowDraft } from "../lib/policy";
import { FieldError, invalidAt } from "./ui";

const val = (e: Event) => (e.target as HTMLInputElement).value;
const P = "execution_params";

/** The time zones this browser knows, offered while typing one. */
const zones = () => (Intl as { supportedValuesOf?: (key: string) => string[] }).supportedValuesOf?.("timeZone") ?? [];

/** The policy's number fields. */
type NumberName = Exclude<keyof PolicyDraft, "policy" | "windows" | "sleep" | "keep_warm" | "warm_with">;

/** A number field of the policy, its server error shown under it. */
function NumberField(props: {
  label: string;
  hint?: string;
  name: NumberName;
  d: PolicyDraft;
  set(p: Partial<PolicyDraft>): void;
  error?: ApiError;
  min?: number;
  max?: number;
  placeholder?: string;
}) {
  const field = `${P}.${props.name}`;
  return html`<label>${props.label}
    <input type="number" name=${field} min=${props.min ?? 0} max=${props.max} step="1" value=${props.d[props.name]} placeholder=${props.placeholder}
      onInput=${(e: Event) => props.set({ [props.name]: val(e) })} ...${invalidAt(props.error, field)} />
    ${props.hint ? html`<small>${props.hint}</small>` : null}
    <${FieldError} error=${props.error} field=${field} /></label>`;
}

/** A yes/no of the policy, its hint beside it and its server error under it. */
function CheckField(props: {
  label: string;
  hint: string;
  name: "sleep" | "keep_warm";
  d: PolicyDraft;
  set(p: Partial<PolicyDraft>): void;
  error?: ApiError;
}) {
  const field = `${P}.${props.name}`;
  return html`<label class="choice">
    <input type="checkbox" name=${field} checked=${props.d[props.name]} onChange=${(e: Event) => props.set({ [props.name]: (e.target as HTMLInputElement).checked })} ...${invalidAt(props.error, field)} />
    <span><strong>${props.label}</strong><small>${props.hint}</small><${FieldError} error=${props.error} field=${field} /></span></label>`;
}

/** Preload: the project's workloads (slugs, comma-separated) whose use warms this one; an error at any of them shows here. */
function WarmWith({ d, set, error }: { d: PolicyDraft; set(p: Partial<PolicyDraft>): void; error?: ApiError }) {
  const base = `${P}.warm_with`;
  const field = error?.field?.startsWith(`${base}.`) ? error.field : base;
  return html`<label>Warm with
    <input name=${base} value=${d.warm_with} spellcheck=${false} placeholder="chat, embed" onInput=${(e: Event) => set({ warm_with: val(e) })} ...${invalidAt(error, field)} />
    <small>Slugs of other workloads of this project, comma-separated: while one of them is used, this one is started or woken too.</small>
    <${FieldError} error=${error} field=${field} /></label>`;
}

/**
 * How it shares GPUs and host RAM with other workloads: sleeping instead of stopping, pinning,
 * priority, and the policy's preload (`warm_with`, `warm_before_s`).
 */
function SharingFields(common: { d: PolicyDraft; set(p: Partial<PolicyDraft>): void; error?: ApiError }) {
  const scheduled = common.d.policy === "scheduled";
  return html`<fieldset class="sharing">
    <legend>Sharing the GPUs</legend>
    <${CheckField} ...${common} name="sleep" label="Sleep instead of stopping (vLLM, SGLang)"
      hint=${`An idled replica${scheduled ? " outside the windows" : ""} keeps its runtime and frees its GPU memory, and wakes in seconds; other engines stop.`} />
    <${CheckField} ...${common} name="keep_warm" label="Keep warm"
      hint="Never swapped out to make room for another workload, nor stopped while asleep to free host RAM." />
    <div class="grid2">
      <${NumberField} ...${common} name="priority" label="Priority" min=${-100} max=${100} placeholder="0"
        hint="−100 to 100 (default 0): when GPUs or host RAM run short, lower ones give way first; none gives way to a lower one." />
      ${
        scheduled
          ? html`<${NumberField} ...${common} name="warm_before_s" label="Start before a window opens (seconds)" placeholder="0"
          hint="Starts or wakes the replicas this long before each window, so the first requests find them ready." />`
          : html`<${WarmWith} ...${common} />`
      }
    </div>
  </fieldset>`;
}

/** One window of a schedule: days with start and end, or a cron pattern; and its time zone. */
function WindowFields({
  w,
  i,
  onChange,
  onRemove,
  error,
}: {
  w: WindowDraft;
  i: number;
  onChange(w: WindowDraft): void;
  onRemove?: () => void;
  error?: ApiError;
}) {
  const f = (k: string) => `${P}.windows.${i}${k ? `.${k}` : ""}`;
  const set = (p: Partial<WindowDraft>) => onChange({ ...w, ...p });
  const toggleDay = (day: string, on: boolean) =>
    set({ days: on ? DAYS.filter((x) => x === day || w.days.includes(x)) : w.days.filter((x) => x !== day) });
  return html`<fieldset class="window">
    <legend>Window ${i + 1}</legend>
    <div class="row-choices" role="radiogroup" aria-label=${`Window ${i + 1} kind`}>
      <label class="check"><input type="radio" name=${`window-${i}-mode`} checked=${w.mode === "days"} onChange=${() => set({ mode: "days" })} /> Days and hours</label>
      <label class="check"><input type="radio" name=${`window-${i}-mode`} checked=${w.mode === "cron"} onChange=${() => set({ mode: "cron" })} /> Cron pattern</label>
    </div>
    ${
      w.mode === "days"
        ? html`<div class="days" role="group" aria-label=${`Window ${i + 1} days`} ...${invalidAt(error, f("days"))}>
          ${DAYS.map((day) => html`<label class="check"><input type="checkbox" checked=${w.days.includes(day)} onChange=${(e: Event) => toggleDay(day, (e.target as HTMLInputElement).checked)} />${day}</label>`)}
        </div>
        <${FieldError} error=${error} field=${f("days")} />
        <div class="grid2">
          <label>From<input type="time" name=${f("start")} value=${w.start} onInput=${(e: Event) => set({ start: val(e) })} ...${invalidAt(error, f("start"))} /><${FieldError} error=${error} field=${f("start")} /></label>
          <label>Until<input type="time" name=${f("end")} value=${w.end} onInput=${(e: Event) => set({ end: val(e) })} ...${invalidAt(error, f("end"))} />
            <small>Before "from" runs past midnight.</small><${FieldError} error=${error} field=${f("end")} /></label>
        </div>`
        : html`<label>Cron pattern<input name=${f("cron")} value=${w.cron} spellcheck=${false} onInput=${(e: Event) => set({ cron: val(e) })} placeholder="* 9-17 * * 1-5" ...${invalidAt(error, f("cron"))} />
          <small>Open during every minute it matches: <code>* 9-17 * * 1-5</code> is weekdays 9:00–17:59.</small><${FieldError} error=${error} field=${f("cron")} /></label>`
    }
    <label>Time zone<input name=${f("timezone")} list="time-zones" value=${w.timezone} spellcheck=${false} onInput=${(e: Event) => set({ timezone: val(e) })} placeholder="Europe/Berlin" ...${invalidAt(error, f("timezone"))} />
      <${FieldError} error=${error} field=${f("timezone")} /></label>
    <${FieldError} error=${error} field=${f("")} />
    ${onRemove ? html`<div class="actions"><button type="button" class="small" onClick=${onRemove}>Remove window ${i + 1}</button></div>` : null}
  </fieldset>`;
}

/** The policy choice and the fields of the chosen one; `error` is shown at the parameter it names. */
export function PolicyFields({
  d,
  onChange,
  error,
}: {
  d: PolicyDraft;
  onChange(d: PolicyDraft): void;
  error?: ApiError;
}) {
  const set = (p: Partial<PolicyDraft>) => onChange({ ...d, ...p });
  const common = { d, set, error };
  const setWindow = (i: number, w: WindowDraft) => set({ windows: d.windows.map((x, j) => (j === i ? w : x)) });
  return html`<fieldset class="policy">
    <legend>When it runs</legend>
    ${POLICIES.map(
      (p) => html`<label class="choice">
      <input type="radio" name="execution_policy" value=${p.id} checked=${d.policy === p.id} onChange=${() => set({ policy: p.id })} />
      <span><strong>${p.label}</strong><small>${p.hint}</small></span></label>`,
    )}
    <${FieldError} error=${error} field="execution_policy" />
    ${d.policy === "fixed" ? html`<div class="grid3"><${NumberField} ...${common} name="replicas" label="Replicas" min=${1} /></div>` : null}
    ${
      d.policy === "autoscaling"
        ? html`<div class="grid2">
        <${NumberField} ...${common} name="min_replicas" label="Minimum replicas" hint="0 lets it stop entirely; the next request starts it." />
        <${NumberField} ...${common} name="max_replicas" label="Maximum replicas" min=${1} />
        <${NumberField} ...${common} name="idle_timeout_s" label="Stop an idle replica after (seconds)" min=${1} hint="No request in flight or waiting for this long." />
        <${NumberField} ...${common} name="scale_up_after_s" label="Add a replica after (seconds)" hint="How long requests must pile up past the target first." />
        <${NumberField} ...${common} name="target_in_flight" label="Target requests in flight per replica" min=${1} placeholder="the runtime's slots" />
      </div>
      <${SharingFields} ...${common} />`
        : null
    }
    ${
      d.policy === "scheduled"
        ? html`
      <datalist id="time-zones">${zones().map((z) => html`<option value=${z} />`)}</datalist>
      ${d.windows.map(
        (
          w,
          i,
        ) => html`<${WindowFields} key=${i} w=${w} i=${i} error=${error} onChange=${(x: WindowDraft) => setWindow(i, x)}
        onRemove=${d.windows.length > 1 ? () => set({ windows: d.windows.filter((_, j) => j !== i) }) : undefined} />`,
      )}
      <${FieldError} error=${error} field=${`${P}.windows`} />
      <div class="actions"><button type="button" class="small" onClick=${() => set({ windows: [...d.windows, newWindow()] })}>Add a window</button></div>
      <div class="grid2">
        <${NumberField} ...${common} name="replicas" label="Replicas inside a window" min=${1} />
        <${NumberField} ...${common} name="min_replicas_outside" label="Replicas outside the windows" />
      </div>
      <${SharingFields} ...${common} />`
        : null
    }
  </fieldset>`;
}
