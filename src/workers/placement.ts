/**
 * Placement of a multi-node group as pure functions over a snapshot of the fleet: which workers
 * host the members of a workload that spans `nodes` machines, and on which GPUs, or why it cannot
 * be placed. All or nothing: a group is placed only when every member fits.
 */
import { fitOnGpus, gib, type FreeGpu } from "../models/fit";

/** One worker as placement sees it. */
export interface WorkerSnapshot {
  id: string;
  name: string;
  online: boolean;
  /** Its `--cluster-address`, or null when it hosts no group members. */
  clusterAddress: string | null;
  gpus: FreeGpu[];
  /** Uuids of its GPUs (for a `gpu_resource_id` pin). */
  gpuUuids: string[];
  /** How many replicas use each GPU index already (the least shared are picked when the need is unknown). */
  gpuUse: Map<number, number>;
}

/** What a group needs. */
export interface GroupNeed {
  nodes: number;
  /** GPUs on each member. */
  gpusPerNode: number;
  /** Whether the backend needs GPUs (vLLM, SGLang) or may run on CPUs too (llama.cpp RPC servers). */
  needsGpu: boolean;
  /** The model's whole estimate in bytes, spread over the members' GPUs; undefined when unknown. */
  bytes?: number;
  /** Text of the estimate for reasons. */
  text?: string;
  /** `worker_id` pin (id or name): that worker leads the group. */
  pinnedWorker?: string | null;
  /** `gpu_resource_id` pin: the worker with that GPU leads the group. */
  pinnedGpu?: string | null;
}

/** A placed member: rank = index in the list (0 leads). */
export interface MemberPlacement {
  workerId: string;
  gpuIndices: number[];
}

/** The GPUs a member takes on a worker: the fitting ones when the need is known, else the least shared. */
function gpusFor(w: WorkerSnapshot, count: number, bytesPerNode?: number): number[] {
  if (w.gpus.length === 0) return [];
  if (bytesPerNode !== undefined) return fitOnGpus(bytesPerNode, w.gpus, count).gpus;
  return w.gpus
    .map((g) => g.index)
    .sort((a, b) => (w.gpuUse.get(a) ?? 0) - (w.gpuUse.get(b) ?? 0) || free(w, b) - free(w, a) || a - b)
    .slice(0, count)
    .sort((a, b) => a - b);
}

const free = (w: WorkerSnapshot, index: number) => w.gpus.find((g) => g.index === index)?.free_mib ?? 0;

/** Why a worker cannot host a member, or null when it can. */
function unfit(w: WorkerSnapshot, need: GroupNeed, bytesPerNode?: number): string | null {
  if (!w.online) return `"${w.name}" is offline`;
  if (!w.clusterAddress) return `"${w.name}" has no --cluster-address`;
  if (need.needsGpu && w.gpus.length < need.gpusPerNode) return `"${w.name}" has ${w.gpus.length} GPU${w.gpus.length === 1 ? "" : "s"}, not ${need.gpusPerNode}`;
  if (bytesPerNode !== undefined && w.gpus.length > 0 && !fitOnGpus(bytesPerNode, w.gpus, need.gpusPerNode).fits) {
    const most = Math.max(...w.gpus.map((g) => g.free_mib));
    return `"${w.name}" has at most ${gib(most * 1048576)} free on a GPU`;
  }
  return null;
}

/**
 * Places a group: `nodes` distinct workers that are online, have a cluster address and fit their
 * share of the model (the estimate split evenly over every member's GPUs). The pinned worker, if
 * any, leads. Returns the members by rank, or why the group cannot be placed, naming what is missing.
 */
export function placeGroup(workers: WorkerSnapshot[], need: GroupNeed): { members: MemberPlacement[] } | { why: string } {
  const bytesPerNode = need.bytes === undefined ? undefined : Math.ceil(need.bytes / need.nodes);
  let leader: WorkerSnapshot | undefined;
  if (need.pinnedWorker) {
    leader = workers.find((w) => w.id === need.pinnedWorker || w.name === need.pinnedWorker);
    if (!leader) return { why: `the pinned worker "${need.pinnedWorker}" does not exist` };
  } else if (need.pinnedGpu) {
    leader = workers.find((w) => w.gpuUuids.includes(need.pinnedGpu!));
    if (!leader) return { why: `no worker has the pinned GPU "${need.pinnedGpu}"` };
  }
  const leaderWhy = leader ? unfit(leader, need, bytesPerNode) : null;
  if (leader && leaderWhy) return { why: `${what(need, bytesPerNode)}; the pinned leader ${leaderWhy}` };
  const fitting: WorkerSnapshot[] = leader ? [leader] : [];
  const refused: string[] = [];
  for (const w of workers) {
    if (w === leader) continue;
    const why = unfit(w, need, bytesPerNode);
    if (why) refused.push(why);
    else fitting.push(w);
  }
  if (fitting.length < need.nodes) {
    const found = fitting.length ? `found ${fitting.length}: ${fitting.map((w) => `"${w.name}"`).join(", ")}` : "found none";
    return { why: `${what(need, bytesPerNode)}; ${found}${refused.length ? ` (${refused.join("; ")})` : ""}` };
  }
  return { members: fitting.slice(0, need.nodes).map((w) => ({ workerId: w.id, gpuIndices: gpusFor(w, need.gpusPerNode, bytesPerNode) })) };
}

/** "needs 2 workers online with --cluster-address and 1 GPU each (~8.0 GiB on each)". */
function what(need: GroupNeed, bytesPerNode?: number): string {
  const gpus = need.needsGpu ? ` and ${need.gpusPerNode} GPU${need.gpusPerNode === 1 ? "" : "s"} each` : "";
  const share = bytesPerNode !== undefined ? ` with room for ~${gib(bytesPerNode)} each (${need.text ?? "the model"}, split over ${need.nodes} machines)` : "";
  return `this workload spans ${need.nodes} machines: it needs ${need.nodes} workers online with --cluster-address${gpus}${share}`;
}
