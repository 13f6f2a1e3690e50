/**
 * Ollama's OLLAMA_HOST as Ollama reads it (issue 34, M13): envconfig/config.go `Host()` (v0.12) — no
 * scheme: http on 11434; `http://host` without a port is port 80, `https://` 443; `:port` listens on
 * every interface; `::` is a host on the default port. inferd must connect where the daemon
 * listens, and start it with what the operator wrote. The fake daemon parses it the same way
 * (test/fixtures/ollama/store.ts `parseOllamaHost`), written from Ollama's source, not from inferd's.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { ollama, ollamaAddress } from "../agent/engines/ollama";
import { parseOllamaHost } from "./fixtures/ollama/store";
import { cleanup, tempDir } from "./helpers/proc";
import { freePort } from "./fixtures";
import { launchContext } from "./helpers/launch";
import { startServing } from "./helpers/serving";

afterAll(cleanup);

/** OLLAMA_HOST → where Ollama's daemon listens (envconfig.Host) and where inferd connects. */
const FORMS: [string | undefined, { listens: [string, number]; connects: [string, number] }][] = [
  [undefined, { listens: ["127.0.0.1", 11434], connects: ["127.0.0.1", 11434] }],
  ["0.0.0.0:9999", { listens: ["0.0.0.0", 9999], connects: ["127.0.0.1", 9999] }],
  [":9999", { listens: ["", 9999], connects: ["127.0.0.1", 9999] }],
  ["::", { listens: ["::", 11434], connects: ["::1", 11434] }],
  ["[::1]:9999", { listens: ["::1", 9999], connects: ["::1", 9999] }],
  ["http://10.1.2.3", { listens: ["10.1.2.3", 80], connects: ["10.1.2.3", 80] }],
  ["https://ollama.example", { listens: ["ollama.example", 443], connects: ["ollama.example", 443] }],
  ["http://10.1.2.3:8080/", { listens: ["10.1.2.3", 8080], connects: ["10.1.2.3", 8080] }],
  ["myhost", { listens: ["myhost", 11434], connects: ["myhost", 11434] }],
  ["myhost:notaport", { listens: ["myhost", 11434], connects: ["myhost", 11434] }],
];

describe("OLLAMA_HOST, read as Ollama reads it", () => {
  test.each(FORMS)("%p", (value, { listens, connects }) => {
    expect(parseOllamaHost(value)).toEqual({ host: listens[0], port: listens[1] });
    expect(ollamaAddress(value)).toMatchObject({ host: connects[0], port: connects[1] });
  });
});

describe("the daemon inferd starts", () => {
  const launch = (gpuIndices: number[], env: Record<string, string> = {}) =>
    ollama.launch(
      launchContext("ollama", { gpuIndices, env, which: (c) => (c === "ollama" ? "/usr/bin/ollama" : null) }),
    );
  test("keeps models loaded unless the operator set OLLAMA_KEEP_ALIVE, and sees only the replica's GPUs", () => {
    expect(launch([1]).daemon?.env).toMatchObject({
      OLLAMA_KEEP_ALIVE: "-1",
      CUDA_VISIBLE_DEVICES: "1",
      CUDA_DEVICE_ORDER: "PCI_BUS_ID",
    });
    expect(launch([], { OLLAMA_KEEP_ALIVE: "10m" }).daemon?.env.OLLAMA_KEEP_ALIVE).toBe("10m");
    expect(launch([]).daemon?.env.CUDA_VISIBLE_DEVICES).toBeUndefined();
  });
});

test("a daemon started with OLLAMA_HOST=:<port> serves an Ollama workload", async () => {
  const port = await freePort();
  const s = await startServing({ OLLAMA_HOST: `:${port}`, FAKE_OLLAMA_DIR: tempDir("ollama"), FAKE_PULL_MS: "50" });
  try {
    const w = await s.createWorkload({ name: "small", backend: "ollama", model_name: "llama3.2" });
    await s.waitState(w.id, "ready", 60_000);
    const r = await s.data(w.slug, "/v1/chat/completions", {
      body: { model: "llama3.2", messages: [{ role: "user", content: "hi" }], max_tokens: 2 },
    });
    expect(r.status).toBe(200);
    // The daemon inferd started keeps models loaded while workloads run (Ollama's default unloads after 5 idle minutes).
    const daemon = s.events((e) => e.event === "start" && e.persona === "ollama").at(-1)!;
    expect(String((daemon.env as Record<string, string>).NAMES).split(",")).toContain("OLLAMA_KEEP_ALIVE");
  } finally {
    await s.stop();
  }
});
