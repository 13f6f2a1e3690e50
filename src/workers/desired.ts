import { and, asc, eq, inArray } from "drizzle-orm";
import type { Db } from "../db";
import { adapters, assignments } from "../db/schema";
import { maxRankFor } from "../adapters/check";
import { engineOf } from "../../agent/engines";
import { sha256 } from "../ids";
import type { GroupSpec, ReplicaSpec } from "../../agent/protocol";
import { checkLaunch, checkNodes, type LaunchPolicy } from "../../agent/launch-policy";
import { listAllWorkloads } from "../workloads/service";
import { groupMembers } from "./groups";
import { sleepLevels } from "../placement/workload";
import { sleepLevelOf } from "../placement/snapshot";

/**
 * What a worker should run: one spec per assignment told to run or to sleep (`sleep`: the level), with
 * a revision that changes on edits. A
 * workload whose command a tenant set carries the launch policy, and its verdict is part of the
 * revision, so a policy tightened after launch restarts (and so stops) a runtime it no longer allows.
 * A member of a multi-node group also gets its group: its rank and the generation are part of the
 * revision; the other members' endpoints and readiness are not (the member waits on them).
 */
export async function desiredFor(db: Db, workerId: string, policy?: LaunchPolicy): Promise<ReplicaSpec[]> {
  const byId = new Map((await listAllWorkloads(db)).map((w) => [w.id, w]));
  const rows = (await db.select().from(assignments).where(eq(assignments.workerId, workerId))).filter((a) => {
    const w = byId.get(a.workloadId);
    return w && a.desired !== "idle" && !w.paused;
  });
  const groups = await groupMembers(db, [...new Set(rows.flatMap((a) => (a.groupId ? [a.groupId] : [])))]);
  const lora = await loraSpecs(db, new Set(rows.map((a) => a.workloadId)));
  return rows.map((a) => {
    const w = byId.get(a.workloadId)!;
    const workload = {
      id: w.id,
      slug: w.slug,
      project_slug: w.project_slug,
      backend: w.backend,
      model_name: w.model_name,
      task_type: w.task_type,
      config: w.config,
    };
    const gpu_indices = JSON.parse(a.gpuIndices) as number[];
    const guarded = policy && w.config_origin === "tenant" ? policy : undefined;
    const verdict = guarded
      ? [(checkNodes(guarded, w.nodes) ?? checkLaunch(guarded, w.backend, w.config))?.message ?? "allowed"]
      : [];
    const fresh = a.generation ? [`generation ${a.generation}`] : [];
    const group: GroupSpec | undefined = a.groupId
      ? {
          id: a.groupId,
          nodes: w.nodes,
          rank: a.nodeRank,
          generation: a.generation,
          members: groups.get(a.groupId) ?? [],
        }
      : undefined;
    const place = group ? [group.id, group.rank, group.nodes, ...group.members.map((m) => m.address)] : [];
    // A workload whose idled replicas may sleep runs with its engine's sleep mode on (part of the launch);
    // whether it sleeps now is not (a change puts it to sleep or wakes it, never restarts it).
    const sleepMode = sleepLevels(w).length > 0;
    const level = sleepLevelOf(a.desired);
    const revision = sha256(
      JSON.stringify([
        workload.backend,
        workload.model_name,
        workload.config,
        gpu_indices,
        a.gpus,
        ...verdict,
        ...fresh,
        ...place,
        ...(sleepMode ? ["sleep mode"] : []),
        ...loraRevision(w.backend, lora.get(w.id)),
      ]),
    ).slice(0, 16);
    return {
      assignment_id: a.id,
      workload,
      concurrency: a.concurrency,
      gpus: a.gpus,
      gpu_indices,
      revision,
      ...(guarded ? { policy: guarded } : {}),
      ...(group ? { group } : {}),
      ...(sleepMode ? { sleep_mode: true } : {}),
      ...(level ? { sleep: level } : {}),
      ...(lora.has(w.id) ? { lora: lora.get(w.id) } : {}),
    };
  });
}

/**
 * The LoRA part of the specs of `workloadIds`' replicas: their ready adapters (oldest first: llama.cpp's
 * ids), the `--max-lora-rank` they need and the slots (none when a workload has no adapter).
 */
async function loraSpecs(db: Db, workloadIds: Set<string>): Promise<Map<string, NonNullable<ReplicaSpec["lora"]>>> {
  const out = new Map<string, NonNullable<ReplicaSpec["lora"]>>();
  if (workloadIds.size === 0) return out;
  const rows = await db
    .select()
    .from(adapters)
    .where(and(inArray(adapters.workloadId, [...workloadIds]), eq(adapters.state, "ready")))
    .orderBy(asc(adapters.createdAt), asc(adapters.id));
  const by = new Map<string, (typeof rows)[number][]>();
  for (const r of rows) by.set(r.workloadId, [...(by.get(r.workloadId) ?? []), r]);
  for (const [id, list] of by)
    out.set(id, {
      max_rank: maxRankFor(list.map((r) => r.rank ?? 16)) ?? 512,
      slots: LORA_SLOTS,
      adapters: list.map((r) => ({ name: r.name, source: r.source })),
    });
  return out;
}

/** Adapters a replica holds at once unless its command says otherwise (`--max-cpu-loras`, `--max-loaded-loras`). */
const LORA_SLOTS = 8;

/**
 * What of the LoRA spec restarts a runtime: turning LoRA on and the rank it is sized for; the adapter
 * list too for an engine that takes adapters only at launch (llama.cpp).
 */
function loraRevision(backend: string, lora: ReplicaSpec["lora"]): string[] {
  if (!lora) return [];
  const atLaunch = engineOf(backend)?.lora?.runtime === false;
  return [`lora ${lora.max_rank}`, ...(atLaunch ? lora.adapters.map((a) => `${a.name}=${a.source}`) : [])];
}
