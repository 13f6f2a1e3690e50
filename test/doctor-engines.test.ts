/**
 * `inferd doctor --engines` (issue 34): each engine on this machine, read from the engine
 * descriptors, with the fakes on PATH standing for the installed engines (vLLM 0.11.0, llama-server
 * build 6620, Ollama 0.12.6; no SGLang or vLLM-Omni).
 */
import { afterAll, expect, test } from "bun:test";
import { mkdirSync, writeFileSync } from "node:fs";
import { delimiter, join } from "node:path";
import { fixtureEnv } from "./fixtures";
import { cleanup, runInferd, tempDir } from "./helpers/proc";

afterAll(cleanup);

type Report = { backend: string; version: string | null; pinned: string[]; readiness: string[]; missing: string[] };

async function doctor(env: Record<string, string>, dataDir: string): Promise<Report[]> {
  const r = await runInferd({ args: ["doctor", "--engines", "--json", "--data-dir", dataDir], env });
  expect(r.code).toBe(0);
  return JSON.parse(r.stdout).engines;
}

test("installed engines with their versions; missing ones with what to do", async () => {
  const dataDir = tempDir("doctor-engines");
  // A pinned SGLang version inferd installed for a workload earlier.
  mkdirSync(join(dataDir, "runtimes", "sglang", "0.5.2"), { recursive: true });
  writeFileSync(join(dataDir, "runtimes", "sglang", "0.5.2", ".inferd-installed"), "sglang==0.5.2\n");
  const reports = await doctor(fixtureEnv({ FAKE_GPUS: "1x NVIDIA H200:143771" }), dataDir);
  const by = Object.fromEntries(reports.map((r) => [r.backend, r]));
  expect(Object.keys(by)).toEqual(["llamacpp", "ollama", "vllm", "vllm-omni", "sglang"]);
  expect(by.vllm).toMatchObject({ version: "0.11.0", missing: [] });
  expect(by.llamacpp.version).toBe("b6620");
  expect(by.ollama.version).toBe("0.12.6");
  expect(by.sglang).toMatchObject({ version: null, pinned: ["0.5.2"], missing: [] });
  expect(by["vllm-omni"].version).toBeNull();
  expect(by["vllm-omni"].missing[0]).toContain("pip install vllm-omni");
  for (const r of reports) expect(r.readiness.length).toBeGreaterThan(0);
});

test("a machine without engines, GPUs or Ray says what each lacks", async () => {
  // This machine's own PATH, without the fakes: no engine, no nvidia-smi, no ray.
  const env = fixtureEnv();
  env.PATH = env.PATH.split(delimiter).slice(1).join(delimiter);
  const reports = await doctor(env, tempDir("doctor-engines-bare"));
  const vllm = reports.find((r) => r.backend === "vllm")!;
  expect(vllm.version).toBeNull();
  const missing = vllm.missing.join("\n");
  expect(missing).toContain("vLLM is not installed here: pip install vllm");
  expect(missing).toContain("no GPU found");
  expect(missing).toContain("no `ray` on PATH");
});
