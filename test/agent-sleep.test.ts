import { afterAll, describe, expect, test } from "bun:test";
import { mkdirSync, symlinkSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { SGLANG_SLEEP, sglang } from "../agent/engines/sglang";
import { VLLM_SLEEP, vllm } from "../agent/engines/vllm";
import { engineOf } from "../agent/engines";
import type { ReplicaReport, ReplicaSpec } from "../agent/protocol";
import { Replica, type ReplicaHost } from "../agent/replica";
import { weightsMib } from "../agent/replica-sleep";
import { LogRing } from "../agent/ring";
import { fixtureEnv, freePort, readRecord } from "./fixtures";
import { startFakeRuntime } from "./fixtures/fake-runtime";
import { cleanup, tempDir, waitFor } from "./helpers/proc";

/** Sleeping instead of stopping (issue 38): the engines' sleep descriptors, and a real replica sleeping and waking a fake runtime. */
afterAll(cleanup);

describe("the engines' sleep calls", () => {
  test("vLLM: the flag and the dev-mode variable are added once; level 2 wakes by reloading the weights", () => {
    const once = VLLM_SLEEP.enable(["vllm", "serve", "m"], {});
    expect(once).toEqual({ args: ["vllm", "serve", "m", "--enable-sleep-mode"], env: { VLLM_SERVER_DEV_MODE: "1" } });
    expect(VLLM_SLEEP.enable(once.args, once.env)).toEqual(once);
    expect(VLLM_SLEEP.sleep(2)).toEqual([{ method: "POST", path: "/sleep?level=2" }]);
    expect(VLLM_SLEEP.wake(1)).toEqual([{ method: "POST", path: "/wake_up" }]);
    expect(VLLM_SLEEP.wake(2).map((c) => c.path)).toEqual([
      "/wake_up?tags=weights",
      "/collective_rpc",
      "/wake_up?tags=kv_cache",
    ]);
    expect(VLLM_SLEEP.wake(2)[1].body).toEqual({ method: "reload_weights" });
    expect(VLLM_SLEEP.isSleeping?.read({ is_sleeping: true })).toBe(true);
    expect(vllm.sleep?.levels).toEqual([1, 2]);
  });

  test("the host RAM a level-1 sleep holds is the model's size on disk: a local path, or a hub repo in the Hugging Face cache", () => {
    const hf = tempDir("hf-cache");
    // The cache's layout: blobs, and snapshot folders whose files link to them (huggingface_hub's file_download.py).
    const repo = join(hf, "hub", "models--org--tiny");
    mkdirSync(join(repo, "blobs"), { recursive: true });
    writeFileSync(join(repo, "blobs", "aaa"), new Uint8Array(3 * 1024 * 1024));
    for (const [snap, age] of [
      ["old", 1000],
      ["new", 0],
    ] as const) {
      mkdirSync(join(repo, "snapshots", snap), { recursive: true });
      symlinkSync(join(repo, "blobs", "aaa"), join(repo, "snapshots", snap, "model.safetensors"));
      if (snap === "new")
        writeFileSync(join(repo, "snapshots", snap, "extra.safetensors"), new Uint8Array(1024 * 1024));
      const t = new Date(Date.now() - age * 1000);
      utimesSync(join(repo, "snapshots", snap), t, t);
    }
    expect(weightsMib(vllm, ["vllm", "serve", "org/tiny"], { HF_HOME: hf })).toBe(4);
    expect(weightsMib(vllm, ["vllm", "serve", "org/tiny"], { HF_HUB_CACHE: join(hf, "hub") })).toBe(4);
    expect(weightsMib(vllm, ["vllm", "serve", join(repo, "snapshots", "old")])).toBe(3);
    expect(
      weightsMib(sglang, ["python3", "-m", "sglang.launch_server", "--model-path", "org/tiny"], { HF_HOME: hf }),
    ).toBe(4);
    // Not on disk: unknown (the host then counts the GPU memory the replica takes).
    expect(weightsMib(vllm, ["vllm", "serve", "org/absent"], { HF_HOME: hf })).toBeUndefined();
  });

  test("SGLang: the memory saver with the weights' host copy, one level; llama.cpp and Ollama cannot sleep", () => {
    expect(SGLANG_SLEEP.enable(["python3", "-m", "sglang.launch_server", "--enable-memory-saver"], {}).args).toEqual([
      "python3",
      "-m",
      "sglang.launch_server",
      "--enable-memory-saver",
      "--enable-weights-cpu-backup",
    ]);
    expect(sglang.sleep?.levels).toEqual([1]);
    expect(SGLANG_SLEEP.sleep(1)).toEqual([{ method: "POST", path: "/release_memory_occupation", body: {} }]);
    expect(SGLANG_SLEEP.wake(1)).toEqual([{ method: "POST", path: "/resume_memory_occupation", body: {} }]);
    expect(engineOf("llamacpp")?.sleep).toBeUndefined();
    expect(engineOf("ollama")?.sleep).toBeUndefined();
  });
});

/** A replica of `backend` running `command` against the fakes, with a host that records its reports. */
async function replicaOf(
  backend: "vllm" | "sglang",
  command: string,
  extra: Record<string, string> = {},
  sleepMode = true,
) {
  const dir = tempDir("agent-sleep");
  const record = join(dir, "record.jsonl");
  const reports: ReplicaReport[] = [];
  const host: ReplicaHost = {
    dataDir: dir,
    env: fixtureEnv(
      { FAKE_RECORD: record, FAKE_LOAD_MS: "50", FAKE_GPUS: "1x NVIDIA L4:23034", ...extra },
      { sglang: backend === "sglang" },
    ),
    which: (cmd) => Bun.which(cmd),
    freePort,
    builtinLlama: () => ({ argv: [], env: {} }),
    ensureDaemon: async () => {},
    report: (r) => reports.push(r),
    supervisor: { healthIntervalMs: 50 },
    pullModel: async () => {
      throw new Error("no hub in this test");
    },
  };
  const spec: ReplicaSpec = {
    assignment_id: `asg_${backend}`,
    workload: {
      id: "wl",
      slug: "w",
      project_slug: "p",
      backend,
      model_name: "m",
      task_type: "text2text",
      config: { command },
    },
    concurrency: 1,
    gpus: 1,
    gpu_indices: [0],
    revision: "1",
    sleep_mode: sleepMode,
  };
  const replica = new Replica(spec, new LogRing(), host);
  const reached = (state: string, after = 0) =>
    waitFor(() => reports.slice(after).find((r) => r.state === state), {
      what: state,
      timeoutMs: 30_000,
      detail: () => replica.ring.text(),
    });
  const events = (event: string) => readRecord(record).filter((e) => e.event === event);
  const chat = async (base: string) => {
    const r = await fetch(`${base}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }], max_tokens: 4 }),
    });
    return { status: r.status, body: (await r.json()) as { choices?: { message: { content: string } }[] } };
  };
  return { replica, reports, reached, events, chat, spec, dir };
}

describe("a replica that sleeps and wakes", () => {
  for (const [backend, command, flags] of [
    ["vllm", "vllm serve m", ["--enable-sleep-mode"]],
    [
      "sglang",
      "python3 -m sglang.launch_server --model-path m",
      ["--enable-memory-saver", "--enable-weights-cpu-backup"],
    ],
  ] as const) {
    test(`${backend}: ready → sleeping → waking → ready, and answers a chat after`, async () => {
      const r = await replicaOf(backend, command, { FAKE_WAKE_MS: "200" });
      await r.replica.start();
      const ready = await r.reached("ready");
      const start = r.events("start")[0];
      for (const f of flags) expect(start.argv as string[]).toContain(f);
      if (backend === "vllm")
        expect((start.env as { NAMES: string }).NAMES.split(",")).toContain("VLLM_SERVER_DEV_MODE");

      const mark = r.reports.length;
      await r.replica.update({ ...r.spec, sleep: 1 });
      const asleep = await r.reached("sleeping", mark);
      expect(asleep.sleep_level).toBe(1);
      expect(asleep.switch_ms).toBeGreaterThanOrEqual(0);

      const woke = r.reports.length;
      await r.replica.update({ ...r.spec });
      await r.reached("waking", woke);
      const back = await r.reached("ready", woke);
      expect(back.switch_ms).toBeGreaterThanOrEqual(200);
      expect(back.base_url).toBe(ready.base_url);
      const answer = await r.chat(back.base_url!);
      expect(answer.status).toBe(200);
      expect(answer.body.choices?.[0].message.content.length).toBeGreaterThan(0);
      expect(r.events("start")).toHaveLength(1);
      expect(r.events("wake").map((e) => e.level)).toEqual([1]);
      await r.replica.stop();
    }, 60_000);
  }

  test("without sleep_mode the launch adds nothing, and vLLM answers /sleep with FastAPI's 404", async () => {
    const r = await replicaOf("vllm", "vllm serve m", {}, false);
    await r.replica.start();
    const ready = await r.reached("ready");
    const start = r.events("start")[0];
    expect(start.argv as string[]).not.toContain("--enable-sleep-mode");
    expect((start.env as { NAMES: string }).NAMES.split(",")).not.toContain("VLLM_SERVER_DEV_MODE");
    const res = await fetch(`${ready.base_url}/sleep?level=1`, { method: "POST" });
    expect(res.status).toBe(404);
    expect(await res.json()).toEqual({ detail: "Not Found" });
    await r.replica.stop();
  }, 60_000);

  test("vLLM: level 2 holds no host RAM and wakes slower than level 1, by reloading the weights", async () => {
    // A local model of 3 MiB: what a level-1 sleep holds in host RAM, by its files' size.
    const model = join(tempDir("agent-sleep-model"), "m");
    mkdirSync(model);
    writeFileSync(join(model, "model.safetensors"), Buffer.alloc(3 * 1024 * 1024));
    const r = await replicaOf("vllm", `vllm serve ${model}`, { FAKE_WAKE_MS: "100", FAKE_WAKE_L2_MS: "600" });
    await r.replica.start();
    await r.reached("ready");
    for (const level of [1, 2] as const) {
      const mark = r.reports.length;
      await r.replica.update({ ...r.spec, sleep: level });
      const asleep = await r.reached("sleeping", mark);
      expect(asleep.sleep_level).toBe(level);
      expect(asleep.host_ram_mib).toBe(level === 1 ? 3 : 0);
      const woke = r.reports.length;
      await r.replica.update({ ...r.spec });
      await r.reached("ready", woke);
    }
    const wakes = r.events("wake");
    expect(wakes.map((e) => e.level)).toEqual([1, 2]);
    expect(wakes[0].ms as number).toBeGreaterThanOrEqual(100);
    expect(wakes[1].ms as number).toBeGreaterThanOrEqual(600);
    expect(wakes[1].ms as number).toBeGreaterThan(wakes[0].ms as number);
    await r.replica.stop();
  }, 60_000);

  test("a level change while asleep is applied: 1 → 2 gives the host RAM back", async () => {
    const dir = tempDir("agent-sleep-ram");
    const ram = join(dir, "ram.json");
    writeFileSync(ram, JSON.stringify({ free_mib: 5000 }));
    const r = await replicaOf("vllm", "vllm serve m", { FAKE_HOST_RAM_FILE: ram, FAKE_WEIGHTS_MIB: "2000" });
    await r.replica.start();
    await r.reached("ready");
    let mark = r.reports.length;
    await r.replica.update({ ...r.spec, sleep: 1 });
    await r.reached("sleeping", mark);
    expect(JSON.parse(await Bun.file(ram).text())).toEqual({ free_mib: 3000 });
    mark = r.reports.length;
    await r.replica.update({ ...r.spec, sleep: 2 });
    const deeper = await r.reached("sleeping", mark);
    expect(deeper.sleep_level).toBe(2);
    expect(JSON.parse(await Bun.file(ram).text())).toEqual({ free_mib: 5000 });
    await r.replica.stop();
  }, 60_000);

  test("a wake the runtime refuses for host RAM starts the process again", async () => {
    const dir = tempDir("agent-sleep-ram");
    const ram = join(dir, "ram.json");
    writeFileSync(ram, JSON.stringify({ free_mib: 5000 }));
    const r = await replicaOf("vllm", "vllm serve m", { FAKE_HOST_RAM_FILE: ram, FAKE_WEIGHTS_MIB: "2000" });
    await r.replica.start();
    await r.reached("ready");
    const mark = r.reports.length;
    await r.replica.update({ ...r.spec, sleep: 2 });
    await r.reached("sleeping", mark);
    writeFileSync(ram, JSON.stringify({ free_mib: 100 }));
    const woke = r.reports.length;
    await r.replica.update({ ...r.spec });
    const restarting = await waitFor(
      () => r.reports.slice(woke).find((x) => x.state === "starting" && x.reason?.includes("refused to wake")),
      { what: "starting again", timeoutMs: 30_000 },
    );
    expect(restarting.reason).toContain("/collective_rpc answered 500");
    await r.reached("ready", woke);
    expect(r.events("start")).toHaveLength(2);
    await r.replica.stop();
  }, 60_000);

  test("vLLM: a chat sent while it sleeps is not answered: the engine crashes (vllm#15483) and the replica starts again", async () => {
    const r = await replicaOf("vllm", "vllm serve m");
    await r.replica.start();
    const ready = await r.reached("ready");
    const mark = r.reports.length;
    await r.replica.update({ ...r.spec, sleep: 1 });
    await r.reached("sleeping", mark);
    const answer = await r.chat(ready.base_url!);
    expect(answer.status).toBe(500);
    await r.reached("starting", mark);
    await r.reached("ready", mark);
    expect(r.events("crash")).toHaveLength(1);
    await r.replica.stop();
  }, 60_000);

  test("the fake vLLM refuses a level-1 sleep when host RAM is short, with a 500", async () => {
    const dir = tempDir("agent-sleep-ram");
    const ram = join(dir, "ram.json");
    writeFileSync(ram, JSON.stringify({ free_mib: 100 }));
    const rt = await startFakeRuntime({
      persona: "vllm",
      port: 0,
      loadMs: 0,
      sleep: { enabled: true, cpuBackup: true },
      env: { VLLM_SERVER_DEV_MODE: "1", FAKE_HOST_RAM_FILE: ram, FAKE_WEIGHTS_MIB: "2000" },
    });
    await rt.ready;
    const res = await fetch(`${rt.url}/sleep?level=1`, { method: "POST" });
    expect(res.status).toBe(500);
    expect(((await res.json()) as { error: { message: string } }).error.message).toContain("can't allocate memory");
    expect(await (await fetch(`${rt.url}/is_sleeping`)).json()).toEqual({ is_sleeping: false });
    await rt.stop();
  });
});
