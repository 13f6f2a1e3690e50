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
import { join } from "node:path";
import { writeTinyGguf } from "./fixtures/gguf";
import { cleanup, tempDir } from "./helpers/proc";
import { startServing, type Serving } from "./helpers/serving";

let s: Serving;
let slug = "";
beforeAll(async () => {
  s = await startServing({ FAKE_CHAT_TEMPLATE: "single-system" });
  // llama-server has no /v1/messages or /v1/responses: both are translated to chat completions.
  const gguf = join(tempDir("gguf"), "strict.gguf");
  writeTinyGguf(gguf);
  const w = await s.createWorkload({
    name: "strict",
    backend: "llamacpp",
    model_name: "strict-model",
    config: { command: `llama-server -m '${gguf}' -a strict-model` },
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
