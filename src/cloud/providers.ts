/**
 * Cloud GPU providers behind one small interface: create a pod with N GPUs of a model running
 * inferd's agent (which joins with a one-time token), read whether it still exists, terminate it.
 * RunPod's REST API (rest.runpod.io/v1: `POST /pods`, `GET /pods/{id}`, `DELETE /pods/{id}`, Bearer
 * key) and a Kubernetes API server (`/api/v1/namespaces/{ns}/pods`: an agent Pod asking for
 * `nvidia.com/gpu: N` on nodes labelled `nvidia.com/gpu.product=<model>`, bearer token).
 */

/** What a new pod runs and asks for. */
export interface PodSpec {
  /** The worker's name (the pod's name at the provider, made DNS-safe for Kubernetes). */
  name: string;
  gpuType: string;
  gpus: number;
  image: string;
  /** The agent's command: `inferd agent join <url> --token <token>`. */
  args: string[];
  env: Record<string, string>;
}

/** A pod's life as the provider tells it. */
export type PodState = "starting" | "running" | "gone";

/** One cloud provider. Each call throws (with the provider's message) when the provider refuses or fails. */
export interface CloudProvider {
  name: "runpod" | "kubernetes";
  create(spec: PodSpec): Promise<{ podId: string; costPerHour: number | null }>;
  state(podId: string): Promise<PodState>;
  terminate(podId: string): Promise<void>;
}

/** A provider call's failure, with the provider's own words. */
export class ProviderFailed extends Error {}

/** The JSON of a provider's answer, or its failure as a ProviderFailed naming the provider. */
async function answer(what: string, r: Response): Promise<unknown> {
  const text = await r.text();
  if (r.ok) return text ? JSON.parse(text) : null;
  let said = text.slice(0, 300);
  try {
    const b = JSON.parse(text) as { error?: unknown; message?: unknown };
    said = String(b.message ?? (typeof b.error === "string" ? b.error : JSON.stringify(b.error ?? b))).slice(0, 300);
  } catch {}
  throw new ProviderFailed(`${what} answered ${r.status}: ${said}`);
}

/** A fetch with a deadline, its network failure worded as the provider's. */
async function call(what: string, url: string, init: RequestInit, timeoutMs = 15_000): Promise<Response> {
  try {
    return await fetch(url, { ...init, signal: AbortSignal.timeout(timeoutMs) });
  } catch (e) {
    throw new ProviderFailed(`${what} did not answer: ${(e as Error).message}`);
  }
}

/** RunPod's REST API (v1). */
export function runpod(opts: { apiUrl: string; apiKey: string; timeoutMs?: number }): CloudProvider {
  const base = opts.apiUrl.replace(/\/+$/, "");
  const headers = { authorization: `Bearer ${opts.apiKey}`, "content-type": "application/json" };
  return {
    name: "runpod",
    async create(spec) {
      const body = {
        name: spec.name,
        imageName: spec.image,
        gpuTypeIds: [spec.gpuType],
        gpuCount: spec.gpus,
        cloudType: "SECURE",
        containerDiskInGb: 50,
        dockerStartCmd: spec.args,
        env: spec.env,
      };
      const r = await call(
        "RunPod",
        `${base}/pods`,
        { method: "POST", headers, body: JSON.stringify(body) },
        opts.timeoutMs,
      );
      const pod = (await answer("RunPod", r)) as { id: string; costPerHr?: number };
      return { podId: pod.id, costPerHour: typeof pod.costPerHr === "number" ? pod.costPerHr : null };
    },
    async state(podId) {
      const r = await call("RunPod", `${base}/pods/${encodeURIComponent(podId)}`, { headers }, opts.timeoutMs);
      if (r.status === 404) return "gone";
      const pod = (await answer("RunPod", r)) as { desiredStatus?: string };
      return pod.desiredStatus === "TERMINATED" ? "gone" : pod.desiredStatus === "RUNNING" ? "running" : "starting";
    },
    async terminate(podId) {
      const r = await call(
        "RunPod",
        `${base}/pods/${encodeURIComponent(podId)}`,
        { method: "DELETE", headers },
        opts.timeoutMs,
      );
      if (r.status !== 404) await answer("RunPod", r);
    },
  };
}

/** A DNS-1123 name for a pod: lower case, digits and dashes, at most 63 characters. */
export const podName = (name: string) =>
  `inferd-${name.toLowerCase().replace(/[^a-z0-9-]+/g, "-")}`.slice(0, 63).replace(/-+$/, "");

/** A Kubernetes API server (core/v1 pods in one namespace). */
export function kubernetes(opts: {
  apiUrl: string;
  token: string;
  namespace: string;
  gpuHourlyCost?: number;
  timeoutMs?: number;
}): CloudProvider {
  const base = `${opts.apiUrl.replace(/\/+$/, "")}/api/v1/namespaces/${encodeURIComponent(opts.namespace)}/pods`;
  const headers = { authorization: `Bearer ${opts.token}`, "content-type": "application/json" };
  return {
    name: "kubernetes",
    async create(spec) {
      const name = podName(spec.name);
      const pod = {
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name, labels: { "app.kubernetes.io/name": "inferd-agent", "inferd.dev/worker": name } },
        spec: {
          restartPolicy: "Never",
          nodeSelector: { "nvidia.com/gpu.product": spec.gpuType },
          containers: [
            {
              name: "agent",
              image: spec.image,
              args: spec.args,
              env: Object.entries(spec.env).map(([n, value]) => ({ name: n, value })),
              resources: { limits: { "nvidia.com/gpu": String(spec.gpus) } },
            },
          ],
        },
      };
      const r = await call(
        "The Kubernetes API server",
        base,
        { method: "POST", headers, body: JSON.stringify(pod) },
        opts.timeoutMs,
      );
      const made = (await answer("The Kubernetes API server", r)) as { metadata: { name: string } };
      return {
        podId: made.metadata.name,
        costPerHour: opts.gpuHourlyCost === undefined ? null : opts.gpuHourlyCost * spec.gpus,
      };
    },
    async state(podId) {
      const r = await call(
        "The Kubernetes API server",
        `${base}/${encodeURIComponent(podId)}`,
        { headers },
        opts.timeoutMs,
      );
      if (r.status === 404) return "gone";
      const pod = (await answer("The Kubernetes API server", r)) as { status?: { phase?: string } };
      return pod.status?.phase === "Running" ? "running" : "starting";
    },
    async terminate(podId) {
      const r = await call(
        "The Kubernetes API server",
        `${base}/${encodeURIComponent(podId)}`,
        {
          method: "DELETE",
          headers,
        },
        opts.timeoutMs,
      );
      if (r.status !== 404) await answer("The Kubernetes API server", r);
    },
  };
}
