/**
 * What each coding agent is given to reach a workload through inferd: environment variables, and
 * config files of inferd's own (the user's are never touched). Pure data and functions, read by
 * `inferd launch` (src/launch.ts) and the dashboard's "Use with a coding agent".
 */

/** What an agent is given: environment variables, and files written before it starts. */
export interface AgentSettings {
  env: Record<string, string>;
  files: { path: string; text: string }[];
  /** Arguments the agent is started with before the user's (a config file it does not find by itself). */
  args?: string[];
}

/** Where an agent reaches a workload: the project base URL, the key, the model name. */
export interface AgentTarget {
  url: string;
  project: string;
  key: string;
  model: string;
}

/** One coding agent: its program and how it is pointed at inferd. */
export interface AgentKind {
  /** Its name in words. */
  label: string;
  program: string;
  /** The route it calls (for the message when no workload fits). */
  route: string;
  settings(t: AgentTarget, dir: string): AgentSettings;
}

/** The agents inferd can launch, by the name `inferd launch` takes. */
export const AGENTS: Record<string, AgentKind> = {
  claude: {
    label: "Claude Code",
    program: "claude",
    route: "/v1/messages",
    settings: (t) => ({
      env: {
        ANTHROPIC_BASE_URL: `${t.url}/endpoint/${t.project}`,
        ANTHROPIC_AUTH_TOKEN: t.key,
        ANTHROPIC_MODEL: t.model,
        ANTHROPIC_SMALL_FAST_MODEL: t.model,
        // No calls home, nothing the server cannot answer.
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
      },
      files: [],
    }),
  },
  codex: {
    label: "Codex",
    program: "codex",
    route: "/v1/responses",
    settings: (t, dir) => ({
      env: { CODEX_HOME: dir, INFERD_API_KEY: t.key },
      files: [
        {
          path: `${dir}/config.toml`,
          text: [
            `model = ${JSON.stringify(t.model)}`,
            `model_provider = "inferd"`,
            "",
            "[model_providers.inferd]",
            `name = "inferd"`,
            `base_url = ${JSON.stringify(`${t.url}/endpoint/${t.project}/v1`)}`,
            `env_key = "INFERD_API_KEY"`,
            `wire_api = "responses"`,
            "",
          ].join("\n"),
        },
      ],
    }),
  },
  opencode: {
    label: "opencode",
    program: "opencode",
    route: "/v1/chat/completions",
    settings: (t, dir) => ({
      env: { OPENCODE_CONFIG: `${dir}/opencode.json` },
      files: [
        {
          path: `${dir}/opencode.json`,
          text: `${JSON.stringify(
            {
              $schema: "https://opencode.ai/config.json",
              provider: {
                inferd: {
                  npm: "@ai-sdk/openai-compatible",
                  name: "inferd",
                  options: { baseURL: `${t.url}/endpoint/${t.project}/v1`, apiKey: t.key },
                  models: { [t.model]: { name: t.model } },
                },
              },
              model: `inferd/${t.model}`,
            },
            null,
            2,
          )}\n`,
        },
      ],
    }),
  },
  cn: {
    label: "Continue (cn)",
    program: "cn",
    route: "/v1/chat/completions",
    settings: (t, dir) => ({
      env: {},
      args: ["--config", `${dir}/config.yaml`],
      files: [
        {
          path: `${dir}/config.yaml`,
          text: [
            "name: inferd",
            "version: 0.0.1",
            "schema: v1",
            "models:",
            `  - name: ${JSON.stringify(t.model)}`,
            "    provider: openai",
            `    model: ${JSON.stringify(t.model)}`,
            `    apiBase: ${JSON.stringify(`${t.url}/endpoint/${t.project}/v1`)}`,
            `    apiKey: ${JSON.stringify(t.key)}`,
            "    roles: [chat, edit, apply]",
            "",
          ].join("\n"),
        },
      ],
    }),
  },
  qwen: {
    label: "Qwen Code",
    program: "qwen",
    route: "/v1/chat/completions",
    settings: (t) => ({
      env: { OPENAI_BASE_URL: `${t.url}/endpoint/${t.project}/v1`, OPENAI_API_KEY: t.key, OPENAI_MODEL: t.model },
      files: [],
    }),
  },
};

/**
 * The flags a backend's runtime needs to call tools, which every coding agent uses.
 * @example TOOL_FLAGS.llamacpp // → "--jinja"
 */
export const TOOL_FLAGS: Record<string, string> = {
  vllm: "--enable-auto-tool-choice --tool-call-parser <parser>",
  "vllm-omni": "--enable-auto-tool-choice --tool-call-parser <parser>",
  sglang: "--tool-call-parser <parser>",
  llamacpp: "--jinja",
};
