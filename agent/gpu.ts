import { cpus, freemem, hostname, loadavg, totalmem } from "node:os";
import type { GpuInfo, MachineInfo } from "./protocol";

/** Runs a command and returns its stdout, or null when it is missing or fails. Injected in tests. */
export type Exec = (argv: string[]) => Promise<string | null>;

/** How long a probe command may run before it is killed (nvidia-smi can stall for seconds on a busy driver). */
export const PROBE_TIMEOUT_MS = 10_000;

/**
 * An `Exec` that spawns without a shell and kills the command (SIGKILL) once it has run `timeoutMs`,
 * so a hung driver cannot stall the agent or leave processes behind; a killed command reads as missing.
 * @example await timedExec(2000)(["nvidia-smi", "-L"]) // → the list, or null
 */
export function timedExec(timeoutMs: number): Exec {
  return async (argv) => {
    try {
      const p = Bun.spawn(argv, {
        stdout: "pipe",
        stderr: "ignore",
        stdin: "ignore",
        timeout: timeoutMs,
        killSignal: "SIGKILL",
      });
      const out = new Response(p.stdout).text();
      // A killed command may leave a child holding its stdout open: its exit decides, not the pipe.
      if ((await p.exited) !== 0 || p.signalCode !== null) {
        void out.catch(() => {});
        return null;
      }
      return await out;
    } catch {
      return null;
    }
  };
}

/** The real `Exec`, with the probe timeout. */
export const realExec: Exec = timedExec(PROBE_TIMEOUT_MS);

const NVIDIA_FIELDS = "index,uuid,name,memory.total,memory.used,utilization.gpu,temperature.gpu";

const num = (s: string | undefined) => {
  const n = Number((s ?? "").trim());
  return Number.isFinite(n) ? n : 0;
};

/**
 * Parses `nvidia-smi --query-gpu=index,uuid,name,memory.total,memory.used,utilization.gpu,temperature.gpu
 * --format=csv,noheader,nounits` output.
 * @example parseNvidiaSmi("0, GPU-1a2b, NVIDIA RTX 4090, 24564, 1024, 37, 45") // → [{index: 0, …}]
 */
export function parseNvidiaSmi(out: string): GpuInfo[] {
  return out
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l && !/^index\b/i.test(l))
    .map((line) => {
      const [index, uuid, name, total, used, util, temp] = line.split(",").map((c) => c.trim());
      return {
        index: num(index),
        uuid,
        name,
        vendor: "nvidia" as const,
        memory_total_mib: num(total),
        memory_used_mib: num(used),
        utilization_percent: num(util),
        temperature_c: temp === undefined || /N\/A|\[/.test(temp) ? null : num(temp),
      };
    })
    .filter((g) => g.uuid !== undefined && g.name !== undefined);
}

/** Parses `rocm-smi --showid --showproductname --showmeminfo vram --showuse --showtemp --json`. */
export function parseRocmSmi(out: string): GpuInfo[] {
  let data: Record<string, Record<string, string>>;
  try {
    data = JSON.parse(out);
  } catch {
    return [];
  }
  return Object.entries(data)
    .filter(([k]) => /^card\d+$/.test(k))
    .map(([k, v]) => {
      const pick = (re: RegExp) => Object.entries(v).find(([key]) => re.test(key))?.[1];
      return {
        index: Number(k.slice(4)),
        uuid: pick(/unique id|GUID/i) ?? k,
        name: pick(/Card series|Card model|product name/i) ?? "AMD GPU",
        vendor: "amd" as const,
        memory_total_mib: Math.round(num(pick(/VRAM Total Memory \(B\)/i)) / 2 ** 20),
        memory_used_mib: Math.round(num(pick(/VRAM Total Used Memory \(B\)/i)) / 2 ** 20),
        utilization_percent: num(pick(/GPU use/i)),
        temperature_c: pick(/Temperature.*edge|Temperature/i) ? num(pick(/Temperature.*edge|Temperature/i)) : null,
      };
    });
}

/** Probes GPUs: NVIDIA through nvidia-smi, else AMD through rocm-smi, else none. */
export async function probeGpus(exec: Exec = realExec): Promise<GpuInfo[]> {
  const nv = await exec(["nvidia-smi", `--query-gpu=${NVIDIA_FIELDS}`, "--format=csv,noheader,nounits"]);
  if (nv !== null) return parseNvidiaSmi(nv);
  const amd = await exec([
    "rocm-smi",
    "--showid",
    "--showproductname",
    "--showmeminfo",
    "vram",
    "--showuse",
    "--showtemp",
    "--json",
  ]);
  return amd !== null ? parseRocmSmi(amd) : [];
}

/** The host RAM (MiB) the operator lets sleeping replicas hold on this machine (`INFERD_SLEEP_RAM_MIB`), if set. */
function sleepRamCap(env: Record<string, string | undefined>): number | undefined {
  const n = Number(env.INFERD_SLEEP_RAM_MIB);
  return env.INFERD_SLEEP_RAM_MIB && Number.isInteger(n) && n >= 0 ? n : undefined;
}

/** Everything the agent reports about its machine. */
export async function probeMachine(exec: Exec = realExec, env = process.env): Promise<MachineInfo> {
  const cap = sleepRamCap(env);
  return {
    ...(cap !== undefined ? { sleep_ram_mib: cap } : {}),
    hostname: hostname(),
    cpu_cores: cpus().length,
    ram_bytes: totalmem(),
    ram_free_bytes: freemem(),
    gpus: await probeGpus(exec),
    load_avg: loadavg(),
    probed_at: new Date().toISOString(),
  };
}
