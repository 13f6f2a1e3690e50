/**
 * `inferd launch <agent>` (issue 36): picks the chat workload whose runtime calls tools, makes one
 * key for its project (kept), and starts the agent with its settings — environment variables for
 * Claude Code (run here as a stand-in that makes one real Messages call with them,
 * test/fixtures/agents/claude), an inferd-owned config file for Codex and opencode; `--print` shows
 * them. A workload that cannot call tools is named with the flags its runtime needs.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { delimiter, join } from "node:path";
import { writeTinyGguf } from "./fixtures/gguf";
import { cleanup, repoRoot, runInferd, tempDir } from "./helpers/proc";
import { startServing, type Serving } from "./helpers/serving";

let s: Serving;
const launch = (args: string[], env: Record<string, string> = {}) =>
  runInferd({ args: ["launch", ...args, "--data-dir", s.dataDir], env });

beforeAll(async () => {
  s = await startServing();
  const plain = await s.createWorkload({
    name: "plain",
    backend: "vllm",
    model_name: "plain-model",
    config: { command: "vllm serve plain-model" },
  });
  const gguf = join(tempDir("gguf"), "coder.gguf");
  writeTinyGguf(gguf);
  const coder = await s.createWorkload({
    name: "coder",
    backend: "llamacpp",
    model_name: "coder-model",
    config: { command: `llama-server -m '${gguf}' -a coder-model --jinja` },
  });
  await Promise.all([s.waitState(plain.id, "ready", 60_000), s.waitState(coder.id, "ready", 60_000)]);
});
afterAll(async () => {
  await s?.stop();
  await cleanup();
});

test("--print: Claude Code's settings for the workload that calls tools, with a key made once and kept", async () => {
  const first = await launch(["claude", "--print"]);
  expect(first.code).toBe(0);
  expect(first.stdout).toContain(`# claude → ${s.project}/coder (coder-model)`);
  expect(first.stdout).toContain(`export ANTHROPIC_BASE_URL="${s.url}/endpoint/${s.project}"`);
  expect(first.stdout).toContain('export ANTHROPIC_MODEL="coder-model"');
  const key = /ANTHROPIC_AUTH_TOKEN="(ik_live_[^"]+)"/.exec(first.stdout)?.[1];
  expect(key).toBeDefined();
  const again = await launch(["claude", "--print"]);
  expect(again.stdout).toContain(key!);
});

test("Codex gets a config file of inferd's own (CODEX_HOME), on the Responses wire", async () => {
  const r = await launch(["codex", "--print"]);
  expect(r.code).toBe(0);
  expect(r.stdout).toContain(`export CODEX_HOME="${join(s.dataDir, "agents", "codex")}"`);
  expect(r.stdout).toContain('model = "coder-model"');
  expect(r.stdout).toContain(`base_url = "${s.url}/endpoint/${s.project}/v1"`);
  expect(r.stdout).toContain('wire_api = "responses"');
  // Continue's cn finds its config only by argument: launch starts it with one.
  const cn = await launch(["cn", "--print"]);
  expect(cn.stdout).toContain(`# run: cn --config ${join(s.dataDir, "agents", "cn")}/config.yaml`);
  expect(cn.stdout).toContain(`apiBase: "${s.url}/endpoint/${s.project}/v1"`);
});

test("the agent runs with its settings and reaches the model through inferd", async () => {
  const PATH = [join(repoRoot, "test/fixtures/agents"), process.env.PATH].join(delimiter);
  const r = await launch(["claude", "--", "-p", "hello from the agent"], { PATH });
  expect(r.stderr).toBe("");
  expect(r.code).toBe(0);
  // The fake runtime echoes the prompt: the call went through inferd to the workload the agent was given.
  expect(r.stdout).toContain("hello from the agent");
});

test("a workload that cannot call tools is named with the flags its runtime needs", async () => {
  const named = await launch(["claude", "--workload", "plain", "--print"]);
  expect(named.code).toBe(2);
  expect(named.stderr).toContain("cannot call tools");
  expect(named.stderr).toContain("--enable-auto-tool-choice --tool-call-parser <parser>");
  const unknown = await launch(["cursor"]);
  expect(unknown.code).toBe(2);
  expect(unknown.stderr).toContain("usage: inferd launch <claude|codex|opencode|cn|qwen>");
});
