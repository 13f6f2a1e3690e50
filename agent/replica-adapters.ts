/**
 * Getting a replica's LoRA adapters onto its machine (issue 39): each adapter of the spec is pulled
 * like a model (joining a pull under way; a tenant's URL under the address rules), giving the path
 * a load call or a launch flag names.
 */
import type { AdapterPath } from "./engines/types";
import { parseSource } from "./models/source";
import { makeResolver } from "./net/address";
import type { ReplicaSpec } from "./protocol";
import type { ModelPuller } from "./replica-models";

/**
 * Pulls the adapters of `spec` (those of `known` are kept as they are), in the spec's order.
 * Throws with the adapter's name when one cannot be got.
 */
export async function pullAdapters(
  spec: ReplicaSpec,
  pull: ModelPuller,
  signal: AbortSignal,
  known: AdapterPath[] = [],
): Promise<AdapterPath[]> {
  const out: AdapterPath[] = [];
  const guard = spec.policy ? { allowPrivate: spec.policy.private_model_urls, resolve: makeResolver() } : undefined;
  for (const a of spec.lora?.adapters ?? []) {
    const had = known.find((k) => k.name === a.name);
    if (had) {
      out.push(had);
      continue;
    }
    try {
      const got = await pull(parseSource(a.source), () => {}, signal, { workload: spec.workload, guard });
      out.push({ name: a.name, path: got.entry });
    } catch (e) {
      throw new Error(`adapter ${a.name} (${a.source}): ${(e as Error).message}`);
    }
  }
  return out;
}
