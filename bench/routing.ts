#!/usr/bin/env bun
/**
 * Prefix-aware routing against least-loaded routing, in one run: a real inferd (SQLite) with two
 * chat workloads of 4 replicas each on the fake vLLM, whose processes model a prefix cache (time to
 * first token grows with the prompt characters not cached on that replica; the cache holds a few
 * conversations, as a GPU's KV cache does). The same traffic goes to each: 32 concurrent
 * conversations (8 apps, each a long system prompt with tools, ~7 KB; every conversation several
 * turns sent one after another, each resending its history) mixed with one-off prompts. Prints
 * mean and p99 time to first token (streamed, at the client) and throughput, prefix vs least-loaded.
 *
 *   bun bench/routing.ts [--quick]
 *
 * Aim: mean TTFT ratio ≤ 0.5, p99 TTFT and throughput no worse.
 */
import {
  allReady,
  benchProjectKey,
  fakeStats,
  fmt,
  machineLoad,
  parseQuickArgs,
  runBenchmark,
  startInferdForBench,
  summarize,
  waitAssignments,
  type BenchInferd,
  type BenchAssignment,
} from "./lib";
import { seededRandom as rng } from "./lib";

const { quick: QUICK } = parseQuickArgs(process.argv.slice(2), "usage: bun bench/routing.ts [--quick]");

/** The fake runtime: prefill per 1000 uncached prompt characters, first-token floor, per-token time, cache size per process. */
const PREFILL_MS_PER_KCHAR = 10;
const FIRST_TOKEN_MS = 10;
const TOKEN_MS = 2;
/**
 * The prefix cache of one replica, in prompt characters: about what a 24 GB GPU serving an 8B model
 * keeps (~10 GB of KV at ~128 KB per token ≈ 80K tokens ≈ 320K characters) — its share of the
 * conversations, not all of them.
 */
const CACHE_KCHARS = 320;
const APPS = 8;
const CONVERSATIONS = 32;
const TURNS = QUICK ? 8 : 16;
/** Clients sending one-off prompts (an app's system prompt and a new question, after a pause like a user's) while the conversations run. */
const ONE_OFF_CLIENTS = 4;
/** A user's pause before each turn: up to this long (ms), drawn from the seed, so conversations are not in lockstep. */
const THINK_MS = 200;
const REPLICAS = 4;
const HARD_LIMIT_MS = 5 * 60_000;
const SEED = 25;

const VOCAB =
  "part drawer shelf order invoice bolt washer bracket hinge motor cable sensor relay switch panel frame gasket spring valve pump filter clamp nozzle fitting".split(
    " ",
  );
const text = (r: () => number, chars: number) => {
  let s = "";
  while (s.length < chars) s += `${VOCAB[Math.floor(r() * VOCAB.length)]} `;
  return s.trim();
};

/** One app: its system prompt and tools (about 7 KB together). */
function app(i: number) {
  const r = rng(SEED * 1000 + i);
  const tools = Array.from({ length: 6 }, (_, k) => ({
    type: "function",
    function: {
      name: `app${i}_tool${k}`,
      description: text(r, 250),
      parameters: { type: "object", properties: { id: { type: "string", description: text(r, 60) } } },
    },
  }));
  return { system: `You are assistant ${i} of the shop. ${text(r, 5000)}`, tools };
}

/** The user turns of conversation `c` (about 1 KB each: a pasted excerpt or tool output, and a question). */
const turnsOf = (c: number) => {
  const r = rng(SEED * 7919 + c);
  return Array.from({ length: TURNS }, (_, t) => `Turn ${t}. ${text(r, 1000)}?`);
};

/** One streamed chat completion: ms to the first content token, and the answer's text. */
async function stream(
  url: string,
  key: string,
  body: Record<string, unknown>,
  id?: string,
): Promise<{ ttft: number; answer: string }> {
  const t0 = performance.now();
  const r = await fetch(url, {
    method: "POST",
    headers: {
      authorization: `Bearer ${key}`,
      "content-type": "application/json",
      ...(id ? { "x-request-id": id } : {}),
    },
    body: JSON.stringify({ ...body, stream: true, max_tokens: 16, ...(body.tools ? { tool_choice: "none" } : {}) }),
  });
  if (r.status !== 200 || !r.body) throw new Error(`HTTP ${r.status} ${(await r.text()).slice(0, 300)}`);
  const decoder = new TextDecoder();
  let buf = "";
  let answer = "";
  let ttft = NaN;
  for await (const chunk of r.body as unknown as AsyncIterable<Uint8Array>) {
    buf += decoder.decode(chunk, { stream: true });
    let end: number;
    while ((end = buf.indexOf("\n\n")) >= 0) {
      const line = buf.slice(0, end).replace(/^data: /, "");
      buf = buf.slice(end + 2);
      if (line === "[DONE]") continue;
      const content = JSON.parse(line).choices?.[0]?.delta?.content;
      if (typeof content === "string" && content) {
        if (Number.isNaN(ttft)) ttft = performance.now() - t0;
        answer += content;
      }
    }
  }
  if (Number.isNaN(ttft)) throw new Error("a stream without a token");
  return { ttft, answer };
}

/** A workload of 4 replicas with `routing`, each replica with room for all the traffic; waits until every replica answers. */
async function workload(
  inferd: BenchInferd,
  key: string,
  routing: "prefix" | "least_loaded",
): Promise<{ url: string; slug: string; assignments: BenchAssignment[] }> {
  const name = `shop-${routing.replace("_", "-")}`;
  const w = await inferd.admin("/admin/projects/bench/workloads", {
    body: {
      name,
      backend: "vllm",
      model_name: name,
      config: { command: `vllm serve ${name}` },
      execution_params: { replicas: REPLICAS },
      routing,
    },
  });
  const as = await waitAssignments(inferd, w.id, (list) => list.length === REPLICAS && allReady(list), 120_000);
  for (const a of as) await inferd.admin(`/admin/assignments/${a.id}`, { method: "PATCH", body: { concurrency: 64 } });
  const url = `${inferd.url}/endpoint/bench/${w.slug}/v1/chat/completions`;
  // Tiny distinct prompts until every replica has answered one: all four take requests.
  for (let round = 0; ; round++) {
    if ((await Promise.all(as.map((a) => fakeStats(a.base_url!)))).every((s) => s.total > 0)) break;
    if (round > 50) throw new Error(`not every replica of ${name} took requests`);
    await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        stream(url, key, { model: name, messages: [{ role: "user", content: `ping ${round}-${i}` }] }),
      ),
    );
  }
  return { url, slug: w.slug, assignments: as };
}

/** The same traffic on one workload: the conversations, and one-off prompts until they are done. */
async function run(url: string, key: string, model: string): Promise<{ ttfts: number[]; elapsedMs: number }> {
  const apps = Array.from({ length: APPS }, (_, i) => app(i));
  const ttfts: number[] = [];
  let done = false;
  const t0 = performance.now();
  const conversation = async (c: number) => {
    const { system, tools } = apps[c % APPS];
    const messages: { role: string; content: string }[] = [{ role: "system", content: system }];
    const think = rng(SEED * 101 + c);
    for (const [t, turn] of turnsOf(c).entries()) {
      await Bun.sleep(think() * THINK_MS);
      messages.push({ role: "user", content: turn });
      const { ttft, answer } = await stream(url, key, { model, messages, tools }, `c${c}-t${t}`);
      ttfts.push(ttft);
      messages.push({ role: "assistant", content: answer });
    }
  };
  const oneOffs = async (client: number) => {
    const r = rng(SEED * 31 + client);
    while (!done) {
      await Bun.sleep(r() * THINK_MS);
      const { system, tools } = apps[Math.floor(r() * APPS)];
      ttfts.push(
        (
          await stream(
            url,
            key,
            {
              model,
              messages: [
                { role: "system", content: system },
                { role: "user", content: text(r, 300) },
              ],
              tools,
            },
            `one-off-${client}`,
          )
        ).ttft,
      );
    }
  };
  const others = Array.from({ length: ONE_OFF_CLIENTS }, (_, i) => oneOffs(i));
  await Promise.all(Array.from({ length: CONVERSATIONS }, (_, c) => conversation(c)));
  const elapsedMs = performance.now() - t0;
  done = true;
  await Promise.all(others);
  return { ttfts, elapsedMs };
}

/** The prefix counters of `/metrics` for a workload. */
async function hitRate(inferd: BenchInferd, slug: string): Promise<string> {
  const text = await (
    await fetch(`${inferd.url}/metrics`, { headers: { authorization: `Bearer ${inferd.adminToken}` } })
  ).text();
  const read = (name: string) =>
    Number(new RegExp(`^${name}\\{workload="bench/${slug}"\\} (\\d+)$`, "m").exec(text)?.[1] ?? NaN);
  const routed = read("inferd_prefix_routed_total");
  const hits = read("inferd_prefix_hits_total");
  return `${hits} of ${routed} routed by prefix went to their ring replica (${fmt((100 * hits) / routed, 0)} %)`;
}

const line = (what: string, a: number, b: number, unit: string) =>
  `prefix vs least-loaded: ${what} ${fmt(a, 1)} ${unit} vs ${fmt(b, 1)} ${unit} (${fmt(a / b, 2)} x)`;

process.exit(
  await runBenchmark(HARD_LIMIT_MS, async (cleanup) => {
    console.log(
      `routing benchmark${QUICK ? " (quick)" : ""}: ${REPLICAS} replicas per workload; ${CONVERSATIONS} conversations of ${TURNS} turns over ${APPS} apps (system prompt + tools ≈ 7 KB, turns ≈ 1 KB) and ${ONE_OFF_CLIENTS} clients of one-off prompts`,
    );
    console.log(
      `fake runtime: prefill ${PREFILL_MS_PER_KCHAR} ms per 1000 uncached characters, first token +${FIRST_TOKEN_MS} ms, ${TOKEN_MS} ms per token, prefix cache ${CACHE_KCHARS}K characters per replica; ${machineLoad()}`,
    );
    const inferd = await startInferdForBench({
      FAKE_GPUS: `${2 * REPLICAS}x NVIDIA GeForce RTX 4090:24564`,
      FAKE_PREFILL_MS_PER_KCHAR: String(PREFILL_MS_PER_KCHAR),
      FAKE_PREFIX_CACHE_KCHARS: String(CACHE_KCHARS),
      FAKE_FIRST_TOKEN_MS: String(FIRST_TOKEN_MS),
      FAKE_TOKEN_MS: String(TOKEN_MS),
    });
    cleanup.add("inferd", () => inferd.stop());
    const key = await benchProjectKey(inferd, "bench");
    // Two workloads, so each routing starts with cold caches; one runs at a time.
    const least = await workload(inferd, key, "least_loaded");
    const prefix = await workload(inferd, key, "prefix");
    const b = await run(least.url, key, "shop-least-loaded");
    const a = await run(prefix.url, key, "shop-prefix");
    const [sa, sb] = [summarize(a.ttfts), summarize(b.ttfts)];
    const [ra, rb] = [a.ttfts.length / (a.elapsedMs / 1000), b.ttfts.length / (b.elapsedMs / 1000)];
    console.log(
      `\nleast-loaded: ${b.ttfts.length} requests in ${fmt(b.elapsedMs / 1000, 1)} s; prefix: ${a.ttfts.length} requests in ${fmt(a.elapsedMs / 1000, 1)} s`,
    );
    console.log(`prefix workload: ${await hitRate(inferd, prefix.slug)}`);
    console.log(line("mean TTFT", sa.mean, sb.mean, "ms"));
    console.log(line("p99 TTFT", sa.p99, sb.p99, "ms"));
    console.log(line("throughput", ra, rb, "req/s"));
    console.log(
      `aims: mean TTFT ratio ≤ 0.5 ${sa.mean / sb.mean <= 0.5 ? "met" : "NOT met"}; p99 no worse ${sa.p99 <= sb.p99 ? "met" : "NOT met"}; throughput no worse ${ra >= rb ? "met" : "NOT met"}`,
    );
    console.log(`done; ${machineLoad()}`);
  }),
);
