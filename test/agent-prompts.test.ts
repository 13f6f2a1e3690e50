/**
 * What coding agents send, as a chat template sees it (issue 36): Claude Code puts a system-role
 * message (its environment block) after the user's turn, Codex a developer message after its
 * instructions. Many templates take one system message, first; the fake runtime here has such a
 * template (FAKE_CHAT_TEMPLATE=single-system, test/fixtures/runtime/openai.ts) and refuses any other
 * order, as vLLM does with Mistral's or Gemma's template. Translated requests reach it merged.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { systemFirst } from "../src/dataplane/system-first";
import { stableMessages } from "../src/dataplane/stable-prompt";
import { join } from "node:path";
import { writeTinyGguf } from "./fixtures/gguf";
import { cleanup, tempDir } from "./helpers/proc";
import { startServing, type Serving } from "./helpers/serving";

let s: Serving;
let slug = "";
beforeAll(async () => {
  // The runtime models a prefix cache (FAKE_PREFILL_MS_PER_KCHAR): each request records how much of its prompt it found cached.
  s = await startServing({ FAKE_CHAT_TEMPLATE: "single-system", FAKE_PREFILL_MS_PER_KCHAR: "1" });
  // llama-server has no /v1/messages or /v1/responses: both are translated to chat completions.
  const gguf = join(tempDir("gguf"), "strict.gguf");
  writeTinyGguf(gguf);
  const w = await s.createWorkload({
    name: "strict",
    backend: "llamacpp",
    model_name: "strict-model",
    config: { command: `llama-server -m '${gguf}' -a strict-model --jinja` },
  });
  slug = w.slug;
  await s.waitState(w.id, "ready", 60_000);
});
afterAll(async () => {
  await s?.stop();
  await cleanup();
});

test("system messages are merged into one, first, in their order; other messages keep theirs", () => {
  expect(
    systemFirst([
      { role: "system", content: "You are Claude Code." },
      { role: "user", content: "fix the bug" },
      { role: "system", content: [{ type: "text", text: "<env>cwd: /repo</env>" }] },
      { role: "assistant", content: "ok" },
    ]),
  ).toEqual([
    { role: "system", content: "You are Claude Code.\n\n<env>cwd: /repo</env>" },
    { role: "user", content: "fix the bug" },
    { role: "assistant", content: "ok" },
  ]);
  const plain = [
    { role: "system", content: "a" },
    { role: "user", content: "b" },
  ];
  expect(systemFirst(plain)).toBe(plain);
});

test("the template refuses a late system message when sent as is (the runtime's own check)", async () => {
  const r = await s.data(slug, "/v1/chat/completions", {
    body: {
      model: "strict-model",
      messages: [
        { role: "user", content: "hi" },
        { role: "system", content: "env" },
      ],
    },
  });
  expect(r.status).toBe(400);
  expect(JSON.stringify(await r.json())).toContain("Conversation roles must alternate");
});

test("Claude Code's shape on /v1/messages: its environment block after the user's turn reaches the runtime merged first", async () => {
  const anthropic = new Anthropic({ baseURL: `${s.url}/endpoint/${s.project}/${slug}`, apiKey: s.live, maxRetries: 0 });
  const m = await anthropic.messages.create({
    model: "strict-model",
    max_tokens: 32,
    system: "You are Claude Code.",
    messages: [
      { role: "user", content: "fix the bug" },
      { role: "system", content: "<env>cwd: /repo</env>" },
    ] as never,
  });
  expect(m.content[0]).toMatchObject({ type: "text" });
  const sent = s.events((e) => e.event === "request" && e.path === "/v1/chat/completions").at(-1);
  expect(sent?.roles).toEqual(["system", "user"]);
});

test("Codex's shape on /v1/responses: instructions and a developer message become one leading system message", async () => {
  const openai = new OpenAI({ baseURL: `${s.url}/endpoint/${s.project}/${slug}/v1`, apiKey: s.live, maxRetries: 0 });
  const r = await openai.responses.create({
    model: "strict-model",
    instructions: "You are Codex.",
    input: [
      { role: "developer", content: "<permissions>workspace-write</permissions>" },
      { role: "user", content: "list files" },
    ],
    store: false,
  });
  expect(r.status).toBe("completed");
  const sent = s.events((e) => e.event === "request" && e.path === "/v1/chat/completions").at(-1);
  expect(sent?.roles).toEqual(["system", "user"]);
});

test("Claude Code's billing header line is removed from the system prompt, whatever its shape", () => {
  const header = "x-anthropic-billing-header: cc_version=2.1.3.a1b; cc_entrypoint=cli; cch=4f2e1;";
  expect(stableMessages({ system: `${header}\nYou are Claude Code.` }).system).toBe("You are Claude Code.");
  expect(
    stableMessages({
      system: [
        { type: "text", text: header },
        { type: "text", text: "You are Claude Code.", cache_control: { type: "ephemeral" } },
      ],
    }).system,
  ).toEqual([{ type: "text", text: "You are Claude Code.", cache_control: { type: "ephemeral" } }]);
  const plain = { system: "no header here" };
  expect(stableMessages(plain)).toBe(plain);
});

test("a second Claude Code conversation finds the first one's system prompt and tools in the runtime's cache (stable_prompts, on by default); off, it finds nothing", async () => {
  const system = `You are Claude Code.\n${"Help with software engineering tasks, carefully. ".repeat(60)}`;
  const tools = [
    {
      name: "Write",
      description: "write a file",
      input_schema: { type: "object", properties: { path: { type: "string" } } },
    },
  ];
  const conversation = (id: string, prompt: string) => ({
    model: "default",
    max_tokens: 8,
    system: [
      { type: "text", text: `x-anthropic-billing-header: cc_version=2.1.3; cc_entrypoint=cli; cch=${id};` },
      { type: "text", text: system },
    ],
    tools,
    messages: [{ role: "user", content: prompt }],
  });
  const cachedOnSecond = async (workload: string) => {
    for (const [id, prompt] of [
      ["first", "fix the test"],
      ["second", "write the docs"],
    ])
      expect((await s.data(workload, "/v1/messages", { body: conversation(id, prompt) })).status).toBe(200);
    return s.events((e) => e.event === "request" && e.path === "/v1/chat/completions").at(-1)?.cached_chars as number;
  };
  const gguf = join(tempDir("gguf"), "volatile.gguf");
  writeTinyGguf(gguf);
  const off = await s.createWorkload({
    name: "volatile",
    backend: "llamacpp",
    model_name: "strict-model-2",
    stable_prompts: false,
    config: { command: `llama-server -m '${gguf}' -a strict-model-2 --jinja` },
  });
  await s.waitState(off.id, "ready", 60_000);
  expect(await cachedOnSecond(slug)).toBeGreaterThan(system.length - 64);
  // Off: only the header's first block (identical up to its per-conversation part) is found.
  expect(await cachedOnSecond(off.slug)).toBeLessThanOrEqual(64);
});
