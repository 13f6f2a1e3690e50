import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, realpathSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { tenantPolicy } from "./helpers/launch";
import { checkLaunch, type LaunchPolicy } from "../agent/launch-policy";
import { seedProject, startTestServer, type TestServer } from "./helpers/server";
import { joinAgent, startHost, type AgentProc, type Host } from "./helpers/agents";
import { cleanup, tempDir, waitFor } from "./helpers/proc";
import { freePort } from "./fixtures";

/**
 * The launch policy: a tenant's control-plane key cannot make the host run a program, a
 * code-executing flag, a file outside the model directories or a package install; the operator's
 * admin token can; a policy tightened later stops a running workload it no longer allows.
 */
const MODELS = tempDir("policy-models");
const policy: LaunchPolicy = tenantPolicy([MODELS]);
mkdirSync(join(MODELS, "qwen"), { recursive: true });
writeFileSync(join(MODELS, "tiny.gguf"), "GGUF");
symlinkSync("/etc", join(MODELS, "escape"));

afterAll(() => cleanup());

describe("the decision", () => {
  const refused: [string, string, Record<string, unknown>, string, string][] = [
    ["a shell", "vllm", { command: "bash -c 'touch /tmp/owned'" }, "bash", "--policy-vllm-programs"],
    ["another vllm subcommand", "vllm", { command: "vllm bench serve" }, "bench", "--policy-vllm-programs"],
    [
      "a vllm from another path",
      "vllm",
      { command: "/tmp/evil/vllm serve m" },
      "/tmp/evil/vllm",
      "--policy-vllm-programs",
    ],
    ["python running code", "vllm", { command: "python3 -c 'import os'" }, "-c", "--policy-vllm-programs"],
    ["vllm in the sglang backend", "sglang", { command: "vllm serve m" }, "vllm", "--policy-sglang-programs"],
    ["another program as llama.cpp", "llamacpp", { command: "sh -c id" }, "sh", "--policy-llamacpp-programs"],
    [
      "--trust-remote-code",
      "vllm",
      { command: "vllm serve m --trust-remote-code" },
      "--trust-remote-code",
      "--policy-forbidden-flags",
    ],
    [
      "its underscore spelling",
      "vllm-omni",
      { command: "vllm serve m --trust_remote_code" },
      "--trust_remote_code",
      "--policy-forbidden-flags",
    ],
    [
      "its argparse abbreviation",
      "vllm",
      { command: "vllm serve m --trust-remote" },
      "--trust-remote",
      "--policy-forbidden-flags",
    ],
    [
      "it inside a JSON argument",
      "vllm",
      { command: `vllm serve m --speculative-config '{"model":"d","trust_remote_code":true}'` },
      `{"model":"d","trust_remote_code":true}`,
      "--policy-forbidden-flags",
    ],
    [
      "sglang's --trust-remote-code",
      "sglang",
      { command: "python3 -m sglang.launch_server --model-path m --trust-remote-code" },
      "--trust-remote-code",
      "--policy-forbidden-flags",
    ],
    [
      "a chat template from a file",
      "vllm",
      { command: "vllm serve m --chat-template /etc/passwd" },
      "--chat-template",
      "--policy-forbidden-flags",
    ],
    [
      "a chat template file, = form",
      "vllm",
      { command: "vllm serve m --chat-template=./t.jinja" },
      "--chat-template=./t.jinja",
      "--policy-forbidden-flags",
    ],
    [
      "a config file",
      "vllm",
      { command: `vllm serve m --config ${MODELS}/c.yaml` },
      "--config",
      "--policy-forbidden-flags",
    ],
    [
      "a plugin",
      "vllm",
      { command: "vllm serve m --tool-parser-plugin /tmp/p.py" },
      "--tool-parser-plugin",
      "--policy-forbidden-flags",
    ],
    [
      "llama-server's file server",
      "llamacpp",
      { command: `llama-server -m ${MODELS}/tiny.gguf --path /` },
      "--path",
      "--policy-forbidden-flags",
    ],
    [
      "a model outside the model dirs",
      "llamacpp",
      { command: "llama-server -m /etc/shadow" },
      "/etc/shadow",
      "--policy-model-paths",
    ],
    [
      "a relative model file",
      "llamacpp",
      { command: "llama-server -m tiny.gguf" },
      "tiny.gguf",
      "--policy-model-paths",
    ],
    [
      "a climb out of the model dirs",
      "vllm",
      { command: `vllm serve ${MODELS}/../../etc` },
      `${MODELS}/../../etc`,
      "--policy-model-paths",
    ],
    [
      "a symlink out of the model dirs",
      "vllm",
      { command: `vllm serve ${MODELS}/escape` },
      `${MODELS}/escape`,
      "--policy-model-paths",
    ],
    [
      "a dot path",
      "sglang",
      { command: "python3 -m sglang.launch_server --model-path ./m" },
      "./m",
      "--policy-model-paths",
    ],
    [
      "a vLLM install",
      "vllm",
      { command: "vllm serve m", vllm_version: "0.11.0" },
      "vllm_version",
      "--policy-tenant-installs",
    ],
    [
      "an SGLang install",
      "sglang",
      { command: "python3 -m sglang.launch_server --model-path m", sglang_version: "0.5.0" },
      "sglang_version",
      "--policy-tenant-installs",
    ],
    // Second probe: inferd alone chooses where a runtime listens.
    ["a port of its own (vLLM)", "vllm", { command: "vllm serve m --port 8001" }, "--port", "the admin token"],
    [
      "a port, = form (SGLang)",
      "sglang",
      { command: "python3 -m sglang.launch_server --model-path m --port=30001" },
      "--port=30001",
      "the admin token",
    ],
    [
      "a port (llama.cpp)",
      "llamacpp",
      { command: `llama-server -m ${MODELS}/tiny.gguf --port 9000` },
      "--port",
      "the admin token",
    ],
    ["a host", "vllm", { command: "vllm serve m --host 0.0.0.0" }, "--host", "the admin token"],
    ["a unix socket", "vllm", { command: "vllm serve m --uds /tmp/s.sock" }, "--uds", "the admin token"],
    [
      "a shared port",
      "llamacpp",
      { command: `llama-server -m ${MODELS}/tiny.gguf --reuse-port` },
      "--reuse-port",
      "the admin token",
    ],
    // Second probe: every value of a file flag is a path.
    [
      "a chat template file without a slash",
      "vllm",
      { command: "vllm serve m --chat-template .inferd/admin-token" },
      "--chat-template",
      "--policy-forbidden-flags",
    ],
    [
      "a download dir outside the models",
      "vllm",
      { command: "vllm serve m --download-dir tmp/x" },
      "tmp/x",
      "--policy-model-paths",
    ],
    [
      "an SSL key file, = form",
      "vllm",
      { command: "vllm serve m --ssl-keyfile=etc/ssl/key.pem" },
      "etc/ssl/key.pem",
      "--policy-model-paths",
    ],
    [
      "a tokenizer climbing out",
      "vllm",
      { command: "vllm serve m --tokenizer ../../etc" },
      "../../etc",
      "--policy-model-paths",
    ],
    [
      "a LoRA as name=path",
      "vllm",
      { command: "vllm serve m --enable-lora --lora-modules x=/etc" },
      "/etc",
      "--policy-model-paths",
    ],
    [
      "a LoRA as JSON",
      "vllm",
      { command: `vllm serve m --enable-lora --lora-modules '{"name":"x","path":"/root"}'` },
      "/root",
      "--policy-model-paths",
    ],
    [
      "a draft model path inside JSON",
      "vllm",
      { command: `vllm serve m --speculative-config '{"model":"/etc","num_speculative_tokens":2}'` },
      "/etc",
      "--policy-model-paths",
    ],
    [
      "llama.cpp's API key file",
      "llamacpp",
      { command: `llama-server -m ${MODELS}/tiny.gguf --api-key-file /root/keys` },
      "/root/keys",
      "--policy-model-paths",
    ],
    [
      "llama.cpp's system prompt file",
      "llamacpp",
      { command: `llama-server -m ${MODELS}/tiny.gguf --system-prompt-file etc/passwd` },
      "etc/passwd",
      "--policy-model-paths",
    ],
    [
      "llama.cpp's prompt file",
      "llamacpp",
      { command: `llama-server -m ${MODELS}/tiny.gguf -f /etc/passwd` },
      "/etc/passwd",
      "--policy-model-paths",
    ],
    [
      "llama.cpp's JSON schema file",
      "llamacpp",
      { command: `llama-server -m ${MODELS}/tiny.gguf -jf /etc/passwd` },
      "/etc/passwd",
      "--policy-model-paths",
    ],
    // Second probe: a runtime opens no connections of a tenant's choosing.
    [
      "a loopback model URL",
      "llamacpp",
      { command: "llama-server -mu http://127.0.0.1:9/admin/x.gguf?x=1" },
      "http://127.0.0.1:9/admin/x.gguf?x=1",
      "--allow-private-model-urls",
    ],
    [
      "a private model URL",
      "llamacpp",
      { command: "llama-server -mu https://10.0.0.1/m.gguf" },
      "https://10.0.0.1/m.gguf",
      "--allow-private-model-urls",
    ],
    [
      "the metadata service as a model URL",
      "llamacpp",
      { command: "llama-server -mu https://169.254.169.254/latest/m.gguf" },
      "https://169.254.169.254/latest/m.gguf",
      "--allow-private-model-urls",
    ],
    [
      "an IPv4-mapped loopback model URL",
      "llamacpp",
      { command: "llama-server -mu https://[::ffff:127.0.0.1]:9/direct.gguf" },
      "https://[::ffff:127.0.0.1]:9/direct.gguf",
      "--allow-private-model-urls",
    ],
    [
      "localhost as a model URL",
      "llamacpp",
      { command: "llama-server -mu https://localhost/m.gguf" },
      "https://localhost/m.gguf",
      "--allow-private-model-urls",
    ],
    [
      "RPC servers",
      "llamacpp",
      { command: `llama-server -m ${MODELS}/tiny.gguf --rpc 127.0.0.1:50052` },
      "--rpc",
      "--policy-forbidden-flags",
    ],
    [
      "an OTLP trace endpoint",
      "vllm",
      { command: "vllm serve m --otlp-traces-endpoint http://127.0.0.1:4318" },
      "--otlp-traces-endpoint",
      "--policy-forbidden-flags",
    ],
    [
      "a tool server",
      "vllm",
      { command: "vllm serve m --tool-server 127.0.0.1:8000" },
      "--tool-server",
      "--policy-forbidden-flags",
    ],
  ];
  test.each(refused)("refuses %s", (_what, backend, config, word, setting) => {
    const v = checkLaunch(policy, backend, config, { realpath: (p) => (existsSync(p) ? realpathSync(p) : null) });
    expect(v).not.toBeNull();
    expect(v!.word).toBe(word);
    expect(v!.setting).toContain(setting);
    expect(v!.message).toContain(word === "vllm_version" || word === "sglang_version" ? word : `"${word}"`);
  });

  const allowed: [string, string, Record<string, unknown>][] = [
    [
      "vllm serve with a hub model and tuning flags",
      "vllm",
      { command: "vllm serve Qwen/Qwen3-8B --served-model-name q --max-model-len 8192 -tp 2" },
    ],
    [
      "the OpenAI entry point",
      "vllm",
      { command: "python3 -m vllm.entrypoints.openai.api_server --model Qwen/Qwen3-8B" },
    ],
    ["a model in the model dirs", "vllm", { command: `vllm serve ${MODELS}/qwen` }],
    ["an inline chat template", "vllm", { command: "vllm serve m --chat-template '{{ messages }}'" }],
    ["sglang", "sglang", { command: "python3 -m sglang.launch_server --model-path Qwen/Qwen3-8B --tp-size 2" }],
    [
      "llama-server on a stored GGUF",
      "llamacpp",
      { command: `llama-server -m ${MODELS}/tiny.gguf -c 2048 -np 2 --api-key k` },
    ],
    ["Ollama (no command at all)", "ollama", {}],
    ["a hub tokenizer", "vllm", { command: "vllm serve m --tokenizer Qwen/Qwen3-8B" }],
    [
      "a one-word hub tokenizer (a name in the runtime's own empty directory, else a hub id)",
      "vllm",
      { command: "vllm serve m --tokenizer gpt2" },
    ],
    ["a LoRA from the hub", "vllm", { command: "vllm serve m --enable-lora --lora-modules sql=org/sql-lora" }],
    ["a LoRA in the model dirs", "vllm", { command: `vllm serve m --enable-lora --lora-modules sql=${MODELS}/qwen` }],
    ["a public https model URL", "llamacpp", { command: "llama-server -mu https://models.example.com/m.gguf" }],
    ["llama.cpp's inline API key", "llamacpp", { command: `llama-server -m ${MODELS}/tiny.gguf --api-key k` }],
  ];
  test.each(allowed)("allows %s", (_what, backend, config) => {
    expect(checkLaunch(policy, backend, config)).toBeNull();
  });

  test("the operator may allow private model URLs and the connection flags", () => {
    const wide: LaunchPolicy = {
      ...policy,
      private_model_urls: true,
      forbidden_flags: policy.forbidden_flags.filter((f) => f !== "--rpc"),
    };
    expect(checkLaunch(wide, "llamacpp", { command: "llama-server -mu http://10.0.0.1/m.gguf" })).toBeNull();
    expect(
      checkLaunch(wide, "llamacpp", { command: `llama-server -m ${MODELS}/tiny.gguf --rpc 10.0.0.2:50052` }),
    ).toBeNull();
    // The address flags stay inferd's whatever the forbidden flags say.
    expect(checkLaunch({ ...wide, forbidden_flags: [] }, "vllm", { command: "vllm serve m --port 8001" })?.word).toBe(
      "--port",
    );
  });

  test("the operator's settings widen it", () => {
    const wide: LaunchPolicy = {
      ...policy,
      programs: { ...policy.programs, vllm: [...policy.programs.vllm, "bash"] },
      forbidden_flags: [],
      tenant_installs: true,
    };
    expect(checkLaunch(wide, "vllm", { command: "bash -c x" })).toBeNull();
    expect(
      checkLaunch(wide, "vllm", { command: "vllm serve m --trust-remote-code", vllm_version: "0.11.0" }),
    ).toBeNull();
  });
});

describe("through the API", () => {
  let s: TestServer;
  let ctx: Awaited<ReturnType<typeof seedProject>>;
  const tenantCreate = (body: unknown) => s.call(`/api/projects/${ctx.project.slug}/workloads`, ctx.sdk, { body });
  beforeAll(async () => {
    s = await startTestServer();
    ctx = await seedProject(s, "Tenant", "tenant");
  });
  afterAll(() => s.close());

  test("a tenant's key is refused a shell with 403 command_not_allowed naming the word and the setting", async () => {
    const r = await tenantCreate({
      name: "owned",
      backend: "vllm",
      model_name: "m",
      config: { command: "bash -c 'touch /tmp/owned-by-tenant'" },
    });
    expect(r.status).toBe(403);
    const { error } = await r.json();
    expect(error).toMatchObject({ code: "command_not_allowed", field: "config.command", word: "bash" });
    expect(error.setting).toContain("--policy-vllm-programs");
    expect(error.message).toContain('"bash" is not allowed');
    expect(await (await s.call(`/api/projects/tenant/workloads`, ctx.sdk)).json()).toHaveLength(0);
  });

  test("each forbidden flag, path and install is refused to the tenant with its word", async () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ command: "vllm serve m --trust-remote-code" }, "--trust-remote-code"],
      [{ command: "vllm serve m --chat-template /etc/passwd" }, "--chat-template"],
      [{ command: "vllm serve /etc" }, "/etc"],
      [{ command: "vllm serve m", vllm_version: "0.11.0" }, "vllm_version"],
    ];
    for (const [config, word] of cases) {
      const r = await tenantCreate({ name: "x", backend: "vllm", model_name: "m", config });
      expect(r.status).toBe(403);
      expect((await r.json()).error).toMatchObject({ code: "command_not_allowed", word });
    }
  });

  test("the admin (the operator) may save the same command; a tenant may not edit it into another forbidden one", async () => {
    const r = await s.admin(`/admin/projects/tenant/workloads`, {
      body: { name: "ops", backend: "vllm", model_name: "m", config: { command: "bash -c 'echo operator'" } },
    });
    expect(r.status).toBe(201);
    const w = await r.json();
    expect(w.config_origin).toBe("admin");
    // A tenant's edit that leaves the command alone is fine…
    expect(
      (await s.call(`/api/workloads/${w.id}`, ctx.sdk, { method: "PATCH", body: { description: "mine" } })).status,
    ).toBe(200);
    // …one that changes it is judged.
    const bad = await s.call(`/api/workloads/${w.id}`, ctx.sdk, {
      method: "PATCH",
      body: { config: { command: "bash -c 'echo tenant'" } },
    });
    expect(bad.status).toBe(403);
    const good = await s.call(`/api/workloads/${w.id}`, ctx.sdk, {
      method: "PATCH",
      body: { config: { command: "vllm serve m" } },
    });
    expect(good.status).toBe(200);
    expect((await (await s.admin(`/admin/workloads/${w.id}`)).json()).config_origin).toBe("tenant");
    expect(Object.keys(await good.json())).not.toContain("config_origin");
  });

  test("GET /admin/policy and /api/policy show the rules and their settings; the launch preview gives the tenant verdict", async () => {
    const p = await (await s.admin("/admin/policy")).json();
    expect(p.programs.vllm).toContain("vllm serve");
    expect(p.forbidden_flags).toContain("--trust-remote-code");
    expect(p.model_paths).toEqual([join(s.dataDir, "models")]);
    expect(p.tenant_installs).toBe(false);
    expect(p.settings.model_paths.flag).toBe("--policy-model-paths");
    expect((await s.call("/api/policy", ctx.sdk)).status).toBe(200);
    expect((await s.call("/api/policy", ctx.live)).status).toBe(403);
    const preview = async (command: string) =>
      (
        await (
          await s.admin("/admin/launch-preview", { body: { backend: "vllm", model_name: "m", config: { command } } })
        ).json()
      ).tenant;
    expect(await preview("vllm serve m")).toMatchObject({ applies: true, allowed: true });
    expect(await preview("vllm serve m --trust-remote-code")).toMatchObject({
      applies: true,
      allowed: false,
      violation: { word: "--trust-remote-code" },
    });
  });

  test("settings widen the policy: tenant installs allowed", async () => {
    const open = await startTestServer({
      INFERD_POLICY_TENANT_INSTALLS: "1",
      INFERD_POLICY_VLLM_PROGRAMS: "vllm serve",
    });
    try {
      const c = await seedProject(open, "Open", "open");
      const r = await open.call(`/api/projects/open/workloads`, c.sdk, {
        body: {
          name: "v",
          backend: "vllm",
          model_name: "m",
          config: { command: "vllm serve m", vllm_version: "0.11.0" },
        },
      });
      expect(r.status).toBe(201);
      const py = await open.call(`/api/projects/open/workloads`, c.sdk, {
        body: {
          name: "p",
          backend: "vllm",
          model_name: "m",
          config: { command: "python3 -m vllm.entrypoints.openai.api_server --model m" },
        },
      });
      expect(py.status).toBe(403);
    } finally {
      await open.close();
    }
  });
});

describe("a policy tightened after launch", () => {
  let host: Host;
  let agent: AgentProc;
  afterAll(async () => {
    await agent?.stop().catch(() => 0);
    await host?.stop().catch(() => 0);
  });

  test("stops a running tenant workload it no longer allows, with the reason, on a remote agent that kept running", async () => {
    const dataDir = tempDir("policy-host");
    const [port, tlsPort] = [await freePort(), await freePort()];
    const args = ["--port", String(port), "--tls-port", String(tlsPort)];
    host = await startHost({}, 5000, { dataDir, args });
    agent = await joinAgent(host, "gpu-p");
    await host.admin("/admin/projects", { name: "T", slug: "t" });
    const sdk = (await (await host.admin("/admin/projects/t/keys", { name: "k", type: "sdk" })).json()).secret;
    const created = await fetch(`${host.url}/api/projects/t/workloads`, {
      method: "POST",
      headers: { authorization: `Bearer ${sdk}`, "content-type": "application/json" },
      body: JSON.stringify({
        name: "w",
        backend: "vllm",
        model_name: "m",
        config: { command: "vllm serve m --max-num-seqs 4" },
      }),
    });
    expect(created.status).toBe(201);
    const w = await created.json();
    expect((await host.admin(`/admin/workloads/${w.id}/assignments`, { worker_id: agent.workerId })).status).toBe(201);
    const detail = async () => (await host.admin(`/admin/workloads/${w.id}`)).json();
    const ready = await waitFor(
      async () => (await detail()).assignments.find((a: { state: string }) => a.state === "ready"),
      { what: "the tenant's replica ready on the agent", timeoutMs: 30_000 },
    );
    expect((await fetch(`${ready.base_url}/health`)).status).toBe(200);

    // The operator restarts the host with --max-num-seqs forbidden to tenants; the agent keeps running.
    await host.stop();
    host = await startHost({ INFERD_POLICY_FORBIDDEN_FLAGS: "--trust-remote-code,--max-num-seqs" }, 5000, {
      dataDir,
      args,
    });
    const failed = await waitFor(
      async () => (await detail()).assignments.find((a: { state: string }) => a.state === "failed"),
      { what: "the replica refused by the tightened policy", timeoutMs: 30_000, detail: agent.output },
    );
    expect(failed.reason).toContain("refused by the launch policy");
    expect(failed.reason).toContain("--max-num-seqs");
    await waitFor(
      async () =>
        (await fetch(`${ready.base_url}/health`).then(
          () => false,
          () => true,
        )) || undefined,
      { what: "the runtime stopped" },
    );
    // The refusal is in the replica's log too (remote logs reach the host in batches).
    await waitFor(
      async () =>
        (await (await host.admin(`/admin/workloads/${w.id}/logs`)).text()).includes("refused by the launch policy") ||
        undefined,
      { what: "the refusal in the replica's log" },
    );
  });
});
