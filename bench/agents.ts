#!/usr/bin/env bun
/**
 * Coding agents and the prefix cache (issue 36): does a second Claude Code conversation reuse what
 * the first one prefilled? Claude Code's system prompt opens with a billing header line that differs
 * per conversation, then a long system prompt and its tool schemas that do not. On the fake runtime
 * that models a prefix cache (FAKE_PREFILL_MS_PER_KCHAR: prefill time per thousand uncached prompt
 * characters), each workload gets conversation A's first request, then conversation B's, and the
 * time to first token of B is compared with A's — once with the workload's `stable_prompts` on
 * (inferd removes the header line) and once off. Prints, per setting, the line
 *
 *   stable prompts on: second conversation TTFT 0.xx× the first's (B ms vs A ms)
 *
 *   bun bench/agents.ts [--quick]
 */
import { benchProjectKey, Cleanups, startInferdForBench } from "./lib";

const QUICK = process.argv.includes("--quick");
/** Prefill cost: 40 ms per thousand uncached characters (a ~12 K-character prompt: about half a second). */
const MS_PER_KCHAR = 40;

/** About 7 K characters of system prompt and 12 tool schemas, as Claude Code 2.1 sends them. */
const SYSTEM = `You are Claude Code, Anthropic's official CLI for Claude.\n${"You are an interactive CLI tool that helps users with software engineering tasks. ".repeat(90)}`;
const TOOLS = Array.from({ length: 12 }, (_, i) => ({
  name: [
    "Bash",
    "Read",
    "Write",
    "Edit",
    "Glob",
    "Grep",
    "Task",
    "TodoWrite",
    "WebFetch",
    "WebSearch",
    "NotebookEdit",
    "BashOutput",
  ][i],
  description: `Tool ${i}: ${"does what its name says, with care for the user's files. ".repeat(4)}`,
  input_schema: {
    type: "object",
    properties: { arg: { type: "string", description: "the argument" } },
    required: ["arg"],
  },
}));

/**
 * The first request of one conversation: its billing header (per conversation), the system prompt
 * of round `round` (each round another one, so the round's first conversation finds nothing cached)
 * and its first prompt.
 */
const firstRequest = (round: string, conversation: string, prompt: string) => ({
  model: "default",
  max_tokens: 16,
  stream: true,
  system: [
    {
      type: "text",
      text: `x-anthropic-billing-header: cc_version=2.1.3.${conversation}; cc_entrypoint=cli; cch=${conversation};`,
    },
    { type: "text", text: `(round ${round}) ${SYSTEM}` },
  ],
  tools: TOOLS,
  messages: [{ role: "user", content: prompt }],
});

/** Milliseconds from sending to the first streamed text delta. */
async function ttft(url: string, key: string, body: unknown): Promise<number> {
  const t0 = performance.now();
  const r = await fetch(url, {
    method: "POST",
    headers: { "x-api-key": key, "content-type": "application/json", "anthropic-version": "2023-06-01" },
    body: JSON.stringify(body),
  });
  if (!r.ok || !r.body) throw new Error(`HTTP ${r.status}: ${await r.text()}`);
  const reader = r.body.getReader();
  const dec = new TextDecoder();
  let seen = "";
  let first = Number.NaN;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    seen += dec.decode(value, { stream: true });
    if (Number.isNaN(first) && seen.includes("content_block_delta")) first = performance.now() - t0;
  }
  return first;
}

async function main(): Promise<void> {
  const cleanups = new Cleanups();
  try {
    const inferd = await startInferdForBench({ FAKE_PREFILL_MS_PER_KCHAR: String(MS_PER_KCHAR), FAKE_TOKEN_MS: "1" });
    cleanups.add("inferd", () => inferd.stop());
    const key = await benchProjectKey(inferd, "agents");
    const rounds = QUICK ? 1 : 3;
    console.log(
      `coding agents and the prefix cache: fake runtime, ${MS_PER_KCHAR} ms per 1000 uncached prompt characters, ${rounds} round(s), medians`,
    );
    for (const stable of [true, false]) {
      const name = stable ? "stable" : "volatile";
      const w = await inferd.admin("/admin/projects/agents/workloads", {
        body: {
          name,
          backend: "vllm",
          model_name: name,
          stable_prompts: stable,
          config: { command: `vllm serve ${name} --enable-auto-tool-choice --tool-call-parser hermes` },
        },
      });
      for (;;) {
        const d = await inferd.admin(`/admin/workloads/${w.id}`);
        if (d.assignments[0]?.state === "ready") break;
        await Bun.sleep(100);
      }
      const url = `${inferd.url}/endpoint/agents/${w.slug}/v1/messages`;
      const a: number[] = [];
      const b: number[] = [];
      for (let i = 0; i < rounds; i++) {
        a.push(await ttft(url, key, firstRequest(`${i}${name}`, `a${i}`, "fix the failing test")));
        b.push(await ttft(url, key, firstRequest(`${i}${name}`, `b${i}`, "add a README section")));
      }
      const med = (xs: number[]) => xs.sort((x, y) => x - y)[Math.floor(xs.length / 2)];
      const [ma, mb] = [med(a), med(b)];
      console.log(
        `stable prompts ${stable ? "on" : "off"}: second conversation TTFT ${(mb / ma).toFixed(2)}× the first's (${mb.toFixed(0)} ms vs ${ma.toFixed(0)} ms)`,
      );
    }
  } finally {
    await cleanups.run();
  }
}

await main();
