/**
 * GPU selection as the GPU stacks really number devices (issue 34, H3 and M11): a replica runs on
 * exactly the GPUs inferd assigned it, on an AMD machine (ROCR_VISIBLE_DEVICES filters, then HIP
 * renumbers from 0) and on a mixed NVIDIA machine (CUDA numbers fastest first unless told PCI bus
 * order, which is nvidia-smi's). The fake runtimes work out the GPUs they can use the way the real
 * stacks do (test/fixtures/gpus.ts `visibleGpus`) and record them.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { gpuEnv } from "../agent/runtimes/args";
import { visibleGpus } from "./fixtures/gpus";
import { cleanup, tempDir } from "./helpers/proc";
import { startServing, type Serving } from "./helpers/serving";

afterAll(cleanup);

describe("the environment that picks a replica's GPUs", () => {
  test("NVIDIA: the probed indices, in nvidia-smi's (PCI bus) order", () => {
    expect(gpuEnv([0, 2])).toEqual({ CUDA_VISIBLE_DEVICES: "0,2", CUDA_DEVICE_ORDER: "PCI_BUS_ID" });
  });
  test("AMD: the physical devices through ROCR, renumbered from 0 for HIP", () => {
    expect(gpuEnv([2, 3], "amd")).toEqual({
      ROCR_VISIBLE_DEVICES: "2,3",
      HIP_VISIBLE_DEVICES: "0,1",
      CUDA_VISIBLE_DEVICES: "0,1",
    });
  });
  test("what the runtimes then see, on the machines below", () => {
    const amd = { FAKE_GPUS: "4x AMD Instinct MI300X:196608" };
    const seen = (env: Record<string, string>) => visibleGpus(env)?.map((g) => g.index);
    expect(seen({ ...amd, ...gpuEnv([2, 3], "amd") })).toEqual([2, 3]);
    // The physical list in HIP's variable, as before: HIP's ordinals 2 and 3 of the two ROCR left are none.
    expect(seen({ ...amd, ROCR_VISIBLE_DEVICES: "2,3", HIP_VISIBLE_DEVICES: "2,3" })).toEqual([]);
    const mixed = { FAKE_GPUS: "1x NVIDIA GeForce RTX 3060:12288;1x NVIDIA H100 80GB HBM3:81559" };
    expect(seen({ ...mixed, ...gpuEnv([0]) })).toEqual([0]);
    // CUDA's default order puts the H100 first: index 0 without the PCI order is the H100.
    expect(seen({ ...mixed, CUDA_VISIBLE_DEVICES: "0" })).toEqual([1]);
  });
});

describe.each([
  ["an AMD machine with four GPUs", "4x AMD Instinct MI300X:196608", 2],
  [
    "an NVIDIA machine with an RTX 3060 and an H100",
    "1x NVIDIA GeForce RTX 3060:12288;1x NVIDIA H100 80GB HBM3:81559",
    1,
  ],
])("on %s", (_what, gpus, tp) => {
  let s: Serving;
  afterAll(() => s?.stop());
  test("every replica runs on the GPUs inferd assigned it", async () => {
    s = await startServing({ FAKE_GPUS: gpus, FAKE_GPU_USAGE_DIR: tempDir("usage"), FAKE_LOAD_MS: "50" });
    const names = ["first", "second"];
    const made = [];
    for (const name of names) {
      made.push(
        await s.createWorkload({
          name,
          backend: "vllm",
          model_name: name,
          config: { command: `vllm serve ${name} --tensor-parallel-size ${tp} --gpu-memory-utilization 0.4` },
        }),
      );
    }
    const placed: number[] = [];
    for (const [i, w] of made.entries()) {
      const detail = await s.waitState(w.id, "ready", 60_000);
      const [a] = detail.assignments;
      const start = s.events((e) => e.event === "start" && (e.argv as string[])[2] === names[i]).at(-1);
      expect(a.gpu_indices).toHaveLength(tp);
      expect((start?.env as Record<string, string> | undefined)?.GPUS_SEEN).toBe((a.gpu_indices as number[]).join(","));
      placed.push(...(a.gpu_indices as number[]));
    }
    // Both GPUs sets are in use, so one of them is not the first GPUs: the case that went wrong.
    expect(new Set(placed).size).toBe(2 * tp);
  });
});
