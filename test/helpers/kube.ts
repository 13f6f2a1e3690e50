/**
 * Kubernetes manifests for tests: rendered with `kubectl kustomize` (the kustomize built into
 * kubectl, as users apply them) and checked against the Kubernetes API's schemas bundled in the
 * `kubernetes-models` packages (KEDA's and the Prometheus Operator's CRDs from their own packages).
 */
import * as core from "kubernetes-models";
import * as keda from "@kubernetes-models/keda";
import * as promOperator from "@kubernetes-models/prometheus-operator";
import { join } from "node:path";
import { repoRoot } from "./proc";

/** One rendered object. */
export type KubeObject = {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  spec?: any;
} & Record<string, any>;

/** The oldest kustomize these manifests are written for (components, `labels`). */
const MIN_KUSTOMIZE = 5;

/** kubectl's client and kustomize versions, or why they cannot be used. */
export function kubectlVersions(): { kubectl: string; kustomize: string } {
  const r = Bun.spawnSync(["kubectl", "version", "--client"], { stdout: "pipe", stderr: "pipe" });
  if (!r.success) throw new Error(`kubectl is not installed (bash .ci/run installs it): ${r.stderr.toString()}`);
  const text = r.stdout.toString();
  const kustomize = /Kustomize Version:\s*v?(\S+)/.exec(text)?.[1] ?? "none";
  if (!(Number(kustomize.split(".")[0]) >= MIN_KUSTOMIZE))
    throw new Error(
      `kubectl's kustomize is ${kustomize}; these manifests need kustomize ${MIN_KUSTOMIZE} or newer (kubectl 1.27+)`,
    );
  return { kubectl: /Client Version:\s*(\S+)/.exec(text)?.[1] ?? "unknown", kustomize };
}

/** `kubectl kustomize deploy/kubernetes/<dir>`: every object it renders. */
export function render(dir: string): KubeObject[] {
  const r = Bun.spawnSync(["kubectl", "kustomize", join(repoRoot, "deploy/kubernetes", dir)], {
    stdout: "pipe",
    stderr: "pipe",
  });
  if (!r.success) throw new Error(`kubectl kustomize ${dir} failed: ${r.stderr.toString()}`);
  const docs = Bun.YAML.parse(r.stdout.toString()) as KubeObject | KubeObject[];
  return (Array.isArray(docs) ? docs : [docs]).filter(Boolean);
}

/** A model class of kubernetes-models: validates its data against the API's schema. */
type ModelClass = { apiVersion: string; kind: string; new (data: unknown): { validate(): void } };

/** Every model of the three packages by `apiVersion/kind`. */
const MODELS = (() => {
  const out = new Map<string, ModelClass>();
  const visit = (ns: Record<string, unknown>) => {
    for (const v of Object.values(ns)) {
      if (
        typeof v === "function" &&
        typeof (v as ModelClass).kind === "string" &&
        typeof (v as ModelClass).apiVersion === "string"
      )
        out.set(`${(v as ModelClass).apiVersion}/${(v as ModelClass).kind}`, v as ModelClass);
      else if (v && typeof v === "object") visit(v as Record<string, unknown>);
    }
  };
  for (const pkg of [core, keda, promOperator]) visit(pkg as unknown as Record<string, unknown>);
  return out;
})();

/** The schema's complaints about `data`, as JSON pointers with messages (none: valid). */
function complaints(model: ModelClass, data: unknown): { path: string; message: string }[] {
  try {
    new model(data).validate();
    return [];
  } catch (e) {
    const errors = (e as { errors?: { instancePath: string; message?: string }[] }).errors;
    if (!errors) throw e;
    return errors.map((x) => ({ path: x.instancePath, message: x.message ?? "invalid" }));
  }
}

const pointer = (path: (string | number)[]) =>
  path.map((p) => `/${String(p).replace(/~/g, "~0").replace(/\//g, "~1")}`).join("");

/**
 * Fields the schema does not know (a typo such as `livenesProbe`), which the schemas themselves let
 * pass: each field in turn is given a value no schema type accepts; a field the schema describes is
 * then refused at its own path, an unknown one is not.
 */
function unknownFields(model: ModelClass, obj: unknown): string[] {
  const unknown: string[] = [];
  const walk = (value: unknown, path: (string | number)[]) => {
    if (Array.isArray(value)) return value.forEach((v, i) => walk(v, [...path, i]));
    if (!value || typeof value !== "object") return;
    for (const [key, child] of Object.entries(value)) {
      const probe = structuredClone(obj) as Record<string, unknown>;
      let at: Record<string | number, unknown> = probe;
      for (const p of path) at = at[p] as Record<string | number, unknown>;
      at[key] = Symbol("probe");
      const where = pointer([...path, key]);
      if (!complaints(model, probe).some((c) => c.path === where || c.path.startsWith(`${where}/`)))
        unknown.push(where);
      else walk(child, [...path, key]);
    }
  };
  walk(obj, []);
  return unknown;
}

/**
 * What is wrong with an object by the Kubernetes API schema of its kind: schema errors, unknown
 * fields, or no schema at all for its apiVersion and kind.
 * @example schemaProblems({ apiVersion: "v1", kind: "Service", metadata: { name: "x" }, spec: { ports: [{ port: "80" }] } }) // → ["Service x: /spec/ports/0/port must be integer"]
 */
export function schemaProblems(obj: KubeObject): string[] {
  const name = `${obj.kind} ${obj.metadata?.name}`;
  const model = MODELS.get(`${obj.apiVersion}/${obj.kind}`);
  if (!model) return [`${name}: no schema for ${obj.apiVersion} ${obj.kind}`];
  return [
    ...complaints(model, obj).map((c) => `${name}: ${c.path || "/"} ${c.message}`),
    ...unknownFields(model, obj).map((p) => `${name}: ${p} is not a field of ${obj.kind}`),
  ];
}
