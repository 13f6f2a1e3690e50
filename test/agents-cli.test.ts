/**
 * Real coding agents against inferd (issue 36): the agents' own CLIs, pinned in
 * test/agents-cli/package.json and installed there by the tests only (never by inferd's start
 * command), run non-interactively against a workload with the settings `inferd launch` gives (here on
 * the workload's own base URL, to pick the route). The model is the fake runtime scripted to call
 * the agent's file-writing tool (FAKE_TOOL_SCRIPT); the agent writes the file and finishes, and the
 * request inspector shows nothing refused or failed.
 * - Claude Code (`claude -p`): Messages passed through (vLLM 0.11 serves /v1/messages) and translated
 *   to chat (llama-server).
 * - Codex (`codex exec`): the Responses API passed through and translated (its default tools include
 *   a namespace and the hosted web_search), with the config file `inferd launch codex` writes.
 * - Qwen Code (`qwen --yolo`), opencode (`opencode run`) and Continue's `cn -p`: chat completions.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { copyFileSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { writeTinyGguf } from "./fixtures/gguf";
import { cleanup, repoRoot, tempDir, waitFor } from "./helpers/proc";
import { startServing, type Serving } from "./helpers/serving";

/** The pinned CLIs' package (test/agents-cli) and where the tests install it: outside test/, so their own test files are never ours. */
const CLI_PACKAGE = join(repoRoot, "test/agents-cli");
const CLI_DIR = join(repoRoot, ".agents-cli");
const CLAUDE = join(CLI_DIR, "node_modules/.bin/claude");
const CODEX = join(CLI_DIR, "node_modules/.bin/codex");
const QWEN = join(CLI_DIR, "node_modules/.bin/qwen");
const OPENCODE = join(CLI_DIR, "node_modules/.bin/opencode");
const CN = join(CLI_DIR, "node_modules/.bin/cn");
const WORK = tempDir("agent-work");
const TARGET = join(WORK, "hello.txt");
const CONTENT = "hello from a coding agent on inferd\n";

let s: Serving;
/** The workloads' ids by slug. */
const ids: Record<string, string> = {};

beforeAll(async () => {
  // The agents' CLIs come from the npm registry, for the tests only.
  if (![CLAUDE, CODEX, QWEN, OPENCODE, CN].every((bin) => existsSync(bin))) {
    // `npm install` with the lock (npm ci refuses this lock: npm omits the optional platform packages of
    // one of cn's dependencies from it, then finds them missing).
    mkdirSync(CLI_DIR, { recursive: true });
    for (const f of ["package.json", "package-lock.json"]) copyFileSync(join(CLI_PACKAGE, f), join(CLI_DIR, f));
    const npm = Bun.spawnSync(["npm", "install", "--no-audit", "--no-fund"], {
      cwd: CLI_DIR,
      stdout: "pipe",
      stderr: "pipe",
    });
    if (npm.exitCode !== 0)
      throw new Error(`npm install of test/agents-cli into .agents-cli failed:\n${npm.stderr.toString()}`);
  }
  s = await startServing({
    // The model calls Claude Code's Write tool, or Codex's exec_command, whichever the agent offers.
    FAKE_TOOL_SCRIPT: JSON.stringify([
      { tool: "Write", param: "file_path", input: { file_path: TARGET, content: CONTENT } },
      { tool: "Write", param: "filepath", input: { filepath: TARGET, content: CONTENT } },
      { tool: "exec_command", input: { cmd: `echo ${CONTENT.trim()} > hello.txt` } },
      { tool: "write_file", input: { file_path: TARGET, content: CONTENT } },
      { tool: "write", input: { filePath: TARGET, content: CONTENT } },
    ]),
  });
  const gguf = join(tempDir("gguf"), "coder.gguf");
  writeTinyGguf(gguf);
  const made = await Promise.all([
    s.createWorkload({
      name: "native",
      backend: "vllm",
      model_name: "native-coder",
      config: { command: "vllm serve native-coder --enable-auto-tool-choice --tool-call-parser hermes" },
    }),
    s.createWorkload({
      name: "translated",
      backend: "llamacpp",
      model_name: "translated-coder",
      // A coding agent's prompt (system prompt and tool schemas) needs a long context.
      config: { command: `llama-server -m '${gguf}' -a translated-coder --jinja -c 131072 -np 1` },
    }),
  ]);
  for (const w of made) ids[w.slug] = w.id;
  await Promise.all(made.map((w) => s.waitState(w.id, "ready", 60_000)));
}, 300_000);
afterAll(async () => {
  await s?.stop();
  await cleanup();
});

/** Runs an agent's CLI in the work folder with `env` (and nothing else of ours), for at most two minutes. */
async function runAgent(argv: string[], env: Record<string, string>) {
  const proc = Bun.spawn(argv, {
    cwd: WORK,
    env: { PATH: process.env.PATH ?? "", ...env },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  const timer = setTimeout(() => proc.kill("SIGKILL"), 120_000);
  const [out, err, code] = await Promise.all([
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
    proc.exited,
  ]);
  clearTimeout(timer);
  return { out, err, code };
}

/** Runs `claude -p` against a workload, as `inferd launch claude` sets it up. */
async function claude(workload: string, model: string) {
  const home = tempDir("agent-home");
  return runAgent(
    [
      CLAUDE,
      "-p",
      "Create hello.txt with a greeting.",
      "--permission-mode",
      "acceptEdits",
      "--output-format",
      "json",
      "--max-turns",
      "4",
    ],
    {
      HOME: home,
      ANTHROPIC_BASE_URL: `${s.url}/endpoint/${s.project}/${workload}`,
      ANTHROPIC_AUTH_TOKEN: s.live,
      ANTHROPIC_MODEL: model,
      ANTHROPIC_SMALL_FAST_MODEL: model,
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
      DISABLE_AUTOUPDATER: "1",
    },
  );
}

/** The agent's requests on a workload (at least two: the tool call and the answer after it) that were refused or failed. */
async function refusedOrFailed(workload: string): Promise<unknown[]> {
  const rows = await waitFor(
    async () => {
      const page = await (await s.admin(`/admin/workloads/${ids[workload]}/requests?limit=200`)).json();
      const list = page.requests as { status: number }[] | undefined;
      return list && list.length >= 2 ? list : undefined;
    },
    { what: "the agent's requests in the inspector" },
  );
  return rows.filter((r) => r.status >= 400);
}

/** Runs `codex exec` against a workload with the config file `inferd launch codex` writes. */
async function codex(workload: string, model: string) {
  const home = tempDir("codex-home");
  writeFileSync(
    join(home, "config.toml"),
    [
      `model = "${model}"`,
      `model_provider = "inferd"`,
      "",
      "[model_providers.inferd]",
      `name = "inferd"`,
      `base_url = "${s.url}/endpoint/${s.project}/${workload}/v1"`,
      `env_key = "INFERD_API_KEY"`,
      `wire_api = "responses"`,
      "",
    ].join("\n"),
  );
  return runAgent(
    [
      CODEX,
      "exec",
      "--skip-git-repo-check",
      "--dangerously-bypass-approvals-and-sandbox",
      "Create hello.txt with a greeting.",
    ],
    { HOME: home, CODEX_HOME: home, INFERD_API_KEY: s.live },
  );
}

describe("Codex (its own CLI)", () => {
  for (const [how, workload, model] of [
    ["Responses passed through (vLLM)", "native", "native-coder"],
    ["Responses translated to chat (llama-server)", "translated", "translated-coder"],
  ] as const) {
    test(`runs the command the model asked for, and finishes (${how})`, async () => {
      rmSync(TARGET, { force: true });
      const r = await codex(workload, model);
      expect({ code: r.code, err: r.err.slice(-2000) }).toMatchObject({ code: 0 });
      expect(readFileSync(TARGET, "utf8")).toBe(CONTENT);
      expect(await refusedOrFailed(workload)).toEqual([]);
    }, 180_000);
  }
});

/** Runs `qwen` (Qwen Code) one-shot against a workload with the variables `inferd launch qwen` sets. */
async function qwen(workload: string, model: string) {
  const home = tempDir("qwen-home");
  return runAgent([QWEN, "Create hello.txt with a greeting.", "--yolo", "--output-format", "json"], {
    HOME: home,
    OPENAI_BASE_URL: `${s.url}/endpoint/${s.project}/${workload}/v1`,
    OPENAI_API_KEY: s.live,
    OPENAI_MODEL: model,
  });
}

describe("Qwen Code (its own CLI)", () => {
  for (const [how, workload, model] of [
    ["chat completions (vLLM)", "native", "native-coder"],
    ["chat completions (llama-server)", "translated", "translated-coder"],
  ] as const) {
    test(`writes the file the model asked for, and finishes (${how})`, async () => {
      rmSync(TARGET, { force: true });
      const r = await qwen(workload, model);
      expect({ code: r.code, err: r.err.slice(-2000), out: r.out.slice(-2000) }).toMatchObject({ code: 0 });
      expect(readFileSync(TARGET, "utf8")).toBe(CONTENT);
      expect(await refusedOrFailed(workload)).toEqual([]);
    }, 180_000);
  }
});

/** Runs `opencode run` against a workload with the config file `inferd launch opencode` writes. */
async function opencode(workload: string, model: string) {
  const home = tempDir("opencode-home");
  const config = join(home, "opencode.json");
  writeFileSync(
    config,
    JSON.stringify({
      $schema: "https://opencode.ai/config.json",
      provider: {
        inferd: {
          npm: "@ai-sdk/openai-compatible",
          name: "inferd",
          options: { baseURL: `${s.url}/endpoint/${s.project}/${workload}/v1`, apiKey: s.live },
          models: { [model]: { name: model } },
        },
      },
      model: `inferd/${model}`,
    }),
  );
  return runAgent(
    [OPENCODE, "run", "Create hello.txt with a greeting.", "--model", `inferd/${model}`, "--print-logs"],
    { HOME: home, OPENCODE_CONFIG: config, OPENCODE_DISABLE_AUTOUPDATE: "1" },
  );
}

describe("opencode (its own CLI)", () => {
  test("writes the file the model asked for, and finishes (chat completions, vLLM)", async () => {
    rmSync(TARGET, { force: true });
    const r = await opencode("native", "native-coder");
    expect({ code: r.code, err: r.err.slice(-3000), out: r.out.slice(-1000) }).toMatchObject({ code: 0 });
    expect(readFileSync(TARGET, "utf8")).toBe(CONTENT);
    expect(await refusedOrFailed("native")).toEqual([]);
  }, 180_000);
});

/** Runs Continue's `cn -p` against a workload with a config file naming it as an OpenAI-compatible model. */
async function cn(workload: string, model: string) {
  const home = tempDir("cn-home");
  const config = join(home, "config.yaml");
  writeFileSync(
    config,
    [
      "name: inferd",
      "version: 0.0.1",
      "schema: v1",
      "models:",
      `  - name: ${model}`,
      "    provider: openai",
      `    model: ${model}`,
      `    apiBase: ${s.url}/endpoint/${s.project}/${workload}/v1`,
      `    apiKey: ${s.live}`,
      "    roles: [chat, edit, apply]",
      "",
    ].join("\n"),
  );
  return runAgent([CN, "-p", "Create hello.txt with a greeting.", "--config", config, "--auto"], { HOME: home });
}

describe("Continue's cn (its own CLI)", () => {
  test("writes the file the model asked for, and finishes (chat completions, vLLM)", async () => {
    rmSync(TARGET, { force: true });
    const r = await cn("native", "native-coder");
    expect({ code: r.code, err: r.err.slice(-3000), out: r.out.slice(-1000) }).toMatchObject({ code: 0 });
    expect(readFileSync(TARGET, "utf8")).toBe(CONTENT);
    expect(await refusedOrFailed("native")).toEqual([]);
  }, 180_000);
});

describe("Claude Code (its own CLI)", () => {
  for (const [how, workload, model] of [
    ["Messages passed through (vLLM)", "native", "native-coder"],
    ["Messages translated to chat (llama-server)", "translated", "translated-coder"],
  ] as const) {
    test(`writes the file the model asked for, and finishes (${how})`, async () => {
      rmSync(TARGET, { force: true });
      const r = await claude(workload, model);
      expect({ code: r.code, err: r.err.slice(-2000), out: r.out.slice(-3000) }).toMatchObject({ code: 0 });
      expect(JSON.parse(r.out)).toMatchObject({ type: "result", is_error: false });
      expect(readFileSync(TARGET, "utf8")).toBe(CONTENT);
      expect(await refusedOrFailed(workload)).toEqual([]);
    }, 180_000);
  }
});
