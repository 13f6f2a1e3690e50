/**
 * How each member of a multi-node group is started, with the engines' own multi-node modes:
 * - vLLM (0.11 and later): every member runs `vllm serve … --nnodes N --node-rank R --master-addr
 *   <leader> --master-port <p>`, the others with `--headless` (no API server); tensor parallel =
 *   the member's GPUs and pipeline parallel = N unless the command sets its own.
 * - vLLM with `--distributed-executor-backend ray` in the command: the leader runs the Ray head
 *   (`ray start --head`), the others `ray start --address <head>`, then `vllm serve` runs on the
 *   leader alone (with RAY_ADDRESS) once every member has joined.
 * - SGLang: every member runs the command with `--nnodes N --node-rank R --dist-init-addr
 *   <leader>:<p>` and `--tp` = the group's GPUs unless set.
 * - llama.cpp: the other members run `rpc-server` on their cluster address, the leader runs
 *   `llama-server … --rpc host:port,…` once they listen.
 * Addresses are the operator's (`--cluster-address`), ports are picked by the agents: nothing a
 * workload's command says chooses where the group's traffic goes.
 */
import { dirname, join } from "node:path";
import { existsSync } from "node:fs";
import { hasFlag } from "../command";
import type { GroupSpec } from "../protocol";
import type { LaunchContext, LaunchPlan } from "./types";
import { sglang } from "../engines/sglang";
import { usesRay } from "../engines/vllm";

/**
 * What a member must have before its main process starts: nothing, the leader's group port, every
 * other member up (Ray workers joined), or every other member up and listening (RPC servers).
 */
export type GroupWait = "nothing" | "leader" | "members" | "listening members";

/** How a member takes part in its group, known before anything starts. */
export interface MemberRole {
  /** It listens for the group (torch/SGLang rendezvous, Ray head, RPC server) on a port it picks. */
  listens: boolean;
  /** It reports that port only once its head process is up (the Ray head), not at once. */
  headFirst: boolean;
  /** What its main process waits for: the leader's port, or every other member up. */
  waitFor: GroupWait;
}

/** The role of member `rank` of a group running `backend` with the launch plan `base`. */
export function memberRole(backend: string, base: LaunchPlan, rank: number): MemberRole {
  const leader = rank === 0;
  if (backend === "llamacpp")
    return { listens: !leader, headFirst: false, waitFor: leader ? "listening members" : "nothing" };
  if (backend.startsWith("vllm") && usesRay(base.argv ?? []))
    return { listens: leader, headFirst: leader, waitFor: leader ? "members" : "leader" };
  return { listens: leader, headFirst: false, waitFor: leader ? "nothing" : "leader" };
}

/** What is still missing before a member with `wait` may start, or undefined when nothing is. */
export function missingFor(wait: GroupWait, group: GroupSpec): string | undefined {
  const leader = group.members.find((m) => m.rank === 0);
  if (wait === "leader")
    return leader?.endpoint ? undefined : `the leader (member 0 on "${leader?.worker ?? "?"}") to open its group port`;
  if (wait === "members" || wait === "listening members") {
    const others = group.members.filter((m) => m.rank !== group.rank);
    if (others.length < group.nodes - 1) return `all ${group.nodes} members to be placed`;
    const down = others.filter((m) => !m.ready || (wait === "listening members" && !m.endpoint));
    return down.length ? `${down.map((m) => `member ${m.rank} on "${m.worker}"`).join(", ")} to be up` : undefined;
  }
  return undefined;
}

/** `host:port` of the leader's group listener. */
const leaderEndpoint = (group: GroupSpec) => group.members.find((m) => m.rank === 0)!.endpoint!;

/** `address:port`, with an IPv6 address bracketed. */
const hostPort = (address: string, port: number | string) =>
  `${address.includes(":") ? `[${address}]` : address}:${port}`;

/** The port of an `address:port` endpoint. */
const portOf = (endpoint: string) => endpoint.slice(endpoint.lastIndexOf(":") + 1);
/** The address of an `address:port` endpoint (brackets of IPv6 removed). */
const hostOf = (endpoint: string) => endpoint.slice(0, endpoint.lastIndexOf(":")).replace(/^\[(.*)\]$/, "$1");

/** The Ray head a leader runs before `vllm serve` (the Ray GCS on its cluster address). */
export function rayHead(
  address: string,
  port: number,
  gpus: number,
  env: Record<string, string>,
): { argv: string[]; env: Record<string, string>; healthUrls: string[] } {
  return {
    argv: [
      "ray",
      "start",
      "--head",
      "--node-ip-address",
      address,
      "--port",
      String(port),
      "--num-gpus",
      String(gpus),
      "--block",
    ],
    env,
    healthUrls: [`tcp://${hostPort(address, port)}`],
  };
}

/**
 * The launch plan of a member, from its backend's single-machine plan `base`: the engine's own
 * multi-node flags with the group's addresses and ports (`ownPort`: the port this member listens
 * on for the group, when its role listens). Throws when this machine cannot run its part.
 */
export function memberPlan(
  ctx: LaunchContext,
  base: LaunchPlan,
  group: GroupSpec,
  address: string,
  ownPort?: number,
): LaunchPlan {
  const backend = ctx.spec.workload.backend;
  const args = base.argv ?? [];
  const { rank, nodes } = group;
  const follower = (argv: string[], listenPort?: number): LaunchPlan => ({
    ...base,
    argv,
    healthUrls: listenPort ? [`tcp://${hostPort(address, listenPort)}`] : [],
    port: listenPort,
    slots: undefined,
  });
  if (backend === "llamacpp") {
    if (rank > 0) return follower([rpcServer(ctx, args[0]), "--host", address, "--port", String(ownPort)], ownPort);
    if (base.builtin)
      throw new Error(
        "llama-server is not installed on this machine: the built-in llama.cpp runtime cannot use the RPC servers of a group",
      );
    const servers = group.members
      .filter((m) => m.rank !== 0)
      .sort((a, b) => a.rank - b.rank)
      .map((m) => m.endpoint!);
    return { ...base, argv: [...args, "--rpc", servers.join(",")] };
  }
  if (backend === "sglang") {
    const tp = hasFlag(args, sglang.flags.tensorParallel) ? [] : ["--tp", String(ctx.spec.gpus * nodes)];
    const leader = rank === 0 ? hostPort(address, ownPort!) : leaderEndpoint(group);
    const argv = [...args, ...tp, "--nnodes", String(nodes), "--node-rank", String(rank), "--dist-init-addr", leader];
    return rank === 0 ? { ...base, argv } : follower(argv);
  }
  const pp = hasFlag(args, ["--pipeline-parallel-size", "-pp"]) ? [] : ["--pipeline-parallel-size", String(nodes)];
  // vLLM advertises VLLM_HOST_IP to its peers (vllm/utils get_ip, vllm/envs.py), else the address of
  // whichever interface routes outward: on a multi-NIC machine not the cluster network's.
  base = { ...base, env: { ...base.env, VLLM_HOST_IP: address } };
  if (usesRay(args)) {
    if (rank === 0)
      return { ...base, argv: [...args, ...pp], env: { ...base.env, RAY_ADDRESS: hostPort(address, ownPort!) } };
    return follower([
      "ray",
      "start",
      "--address",
      leaderEndpoint(group),
      "--node-ip-address",
      address,
      "--num-gpus",
      String(ctx.spec.gpus),
      "--block",
    ]);
  }
  const master =
    rank === 0
      ? { host: address, port: String(ownPort) }
      : { host: hostOf(leaderEndpoint(group)), port: portOf(leaderEndpoint(group)) };
  const argv = [
    ...args,
    ...pp,
    "--nnodes",
    String(nodes),
    "--node-rank",
    String(rank),
    "--master-addr",
    master.host,
    "--master-port",
    master.port,
    ...(rank > 0 ? ["--headless"] : []),
  ];
  return rank === 0 ? { ...base, argv } : follower(argv);
}

/** llama.cpp's `rpc-server`: on PATH, or beside the command's `llama-server`. */
function rpcServer(ctx: LaunchContext, llamaServer: string): string {
  const onPath = ctx.which("rpc-server");
  if (onPath) return onPath;
  const server = ctx.which(llamaServer);
  const beside = server ? join(dirname(server), "rpc-server") : null;
  if (beside && existsSync(beside)) return beside;
  throw new Error(
    "rpc-server (llama.cpp's RPC server, built with -DGGML_RPC=ON) is not installed on this machine; put it on PATH or beside llama-server",
  );
}
