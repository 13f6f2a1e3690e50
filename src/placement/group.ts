/**
 * Placement of a multi-node group: which workers host the members of a workload that spans `nodes`
 * machines, and on which GPUs, or why it cannot be placed; and whether a placed group still stands.
 * All or nothing: a group is placed only when every member fits. Pure functions over a snapshot.
 */
import { fitOnGpus, gib, type FreeGpu } from "../models/fit";
import { pickGpus } from "./replica";
import {
  freeMemory,
  MiB,
  workerNamed,
  type ReplicaSnapshot,
  type Snapshot,
  type WorkerSnapshot,
  type WorkloadSnapshot,
} from "./snapshot";

/** A placed member: rank = index in the list (0 leads). */
export interface MemberPlacement {
  workerId: string;
  gpuIndices: number[];
}

/** Why a worker cannot host a member, or null when it can. */
function unfit(w: WorkerSnapshot, free: FreeGpu[], ws: WorkloadSnapshot, bytesPerNode?: number): string | null {
  if (!w.online) return `"${w.name}" is offline`;
  if (!w.clusterAddress) return `"${w.name}" has no --cluster-address`;
  if (ws.needsGpu && w.gpus.length < ws.gpus)
    return `"${w.name}" has ${w.gpus.length} GPU${w.gpus.length === 1 ? "" : "s"}, not ${ws.gpus}`;
  if (bytesPerNode !== undefined && w.gpus.length > 0 && !fitOnGpus(bytesPerNode, free, ws.gpus).fits) {
    const most = Math.max(...free.map((g) => g.free_mib));
    return `"${w.name}" has at most ${gib(Math.max(0, most) * MiB)} free on a GPU`;
  }
  return null;
}

/**
 * Places the group of `ws` (`ws.nodes` members of `ws.gpus` GPUs each): distinct workers that are
 * online, have a cluster address and fit their share of the model (the estimate split evenly over
 * every member's GPUs). The pinned worker (or the pinned GPU's), if any, leads. Returns the members
 * by rank, or why the group cannot be placed, naming what is missing.
 */
export function placeGroup(snap: Snapshot, ws: WorkloadSnapshot): { members: MemberPlacement[] } | { why: string } {
  const bytesPerNode = ws.need.bytes === undefined ? undefined : Math.ceil(ws.need.bytes / ws.nodes);
  const free = freeMemory(snap);
  let leader: WorkerSnapshot | undefined;
  if (ws.pinnedWorker) {
    leader = workerNamed(snap, ws.pinnedWorker);
    if (!leader) return { why: `the pinned worker "${ws.pinnedWorker}" does not exist` };
  } else if (ws.pinnedGpu) {
    leader = snap.workers.find((w) => w.gpus.some((g) => g.uuid === ws.pinnedGpu));
    if (!leader) return { why: `no worker has the pinned GPU "${ws.pinnedGpu}"` };
  }
  const leaderWhy = leader ? unfit(leader, free.get(leader.id)!, ws, bytesPerNode) : null;
  if (leader && leaderWhy) return { why: `${what(ws, bytesPerNode)}; the pinned leader ${leaderWhy}` };
  const fitting: WorkerSnapshot[] = leader ? [leader] : [];
  const refused: string[] = [];
  for (const w of snap.workers) {
    if (w === leader) continue;
    const why = unfit(w, free.get(w.id)!, ws, bytesPerNode);
    if (why) refused.push(why);
    else fitting.push(w);
  }
  if (fitting.length < ws.nodes) {
    const found = fitting.length
      ? `found ${fitting.length}: ${fitting.map((w) => `"${w.name}"`).join(", ")}`
      : "found none";
    return { why: `${what(ws, bytesPerNode)}; ${found}${refused.length ? ` (${refused.join("; ")})` : ""}` };
  }
  return {
    members: fitting
      .slice(0, ws.nodes)
      .map((w) => ({ workerId: w.id, gpuIndices: pickGpus(snap, w, ws.gpus, bytesPerNode) })),
  };
}

/** "this workload spans 2 machines: it needs 2 workers online with --cluster-address and 1 GPU each (…)". */
function what(ws: WorkloadSnapshot, bytesPerNode?: number): string {
  const gpus = ws.needsGpu ? ` and ${ws.gpus} GPU${ws.gpus === 1 ? "" : "s"} each` : "";
  const share =
    bytesPerNode !== undefined
      ? ` with room for ~${gib(bytesPerNode)} each (${ws.need.text ?? "the model"}, split over ${ws.nodes} machines)`
      : "";
  return `this workload spans ${ws.nodes} machines: it needs ${ws.nodes} workers online with --cluster-address${gpus}${share}`;
}

/**
 * Whether a placed group still fits its workload: one member per rank of one group, as many as
 * `nodes`, each automatic with the GPU count the command asks for, every worker online with a
 * cluster address, and the leader where a pin says.
 */
export function groupStands(snap: Snapshot, ws: WorkloadSnapshot, members: ReplicaSnapshot[]): boolean {
  if (ws.nodes <= 1 || members.length !== ws.nodes) return false;
  const group = members[0].groupId;
  const ranks = new Set(members.map((a) => a.nodeRank));
  if (
    !group ||
    members.some((a) => a.groupId !== group || !a.auto || a.gpus !== ws.gpus) ||
    ranks.size !== ws.nodes ||
    [...ranks].some((r) => r >= ws.nodes)
  )
    return false;
  const worker = (id: string) => snap.workers.find((x) => x.id === id);
  if (
    members.some((a) => {
      const x = worker(a.workerId);
      return !x || !x.clusterAddress || !x.online;
    })
  )
    return false;
  const leader = worker(members.find((a) => a.nodeRank === 0)!.workerId)!;
  if (ws.pinnedWorker) return leader.id === ws.pinnedWorker || leader.name === ws.pinnedWorker;
  if (ws.pinnedGpu) return leader.gpus.some((g) => g.uuid === ws.pinnedGpu);
  return true;
}
