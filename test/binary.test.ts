/**
 * Smoke test of the compiled executable, as a user meets it: one file copied alone into an empty
 * directory, started there on a data dir that does not exist yet. Built once per run of this file.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import pkg from "../package.json";
import { buildStamp, buildTarget, TARGETS, type Built } from "../build/build";
import { writeTinyGguf } from "./fixtures/gguf";
import { cleanup, runInferd, startInferd, tempDir, waitFor, type Inferd } from "./helpers/proc";

const expectedVersion = pkg.version + buildStamp();
let bin: string;
let built: Built;
let appDir: string;
let dataDir: string;
let server: Inferd;

/** The admin API with the server's token. */
const admin = (path: string, init: RequestInit = {}) =>
  fetch(`${server.url}${path}`, {
    ...init,
    headers: { authorization: `Bearer ${server.adminToken}`, "content-type": "application/json", ...init.headers },
  });

beforeAll(async () => {
  built = await buildTarget("linux-x64", { outDir: tempDir("dist") });
  appDir = tempDir("app");
  bin = join(appDir, TARGETS["linux-x64"].file);
  copyFileSync(built.path, bin);
  dataDir = join(tempDir("data"), "store");
  server = await startInferd({ bin: [bin], dataDir, cwd: appDir });
});

afterAll(async () => {
  await server?.stop().catch(() => {});
  await cleanup();
});

describe("the compiled binary, alone in an empty directory", () => {
  test("serves /healthz with the stamped version", async () => {
    expect(readdirSync(appDir)).toEqual([TARGETS["linux-x64"].file]);
    const res = await fetch(`${server.url}/healthz`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ status: "ok", version: expectedVersion });
  });

  test("serves the API docs viewer (Swagger UI) and the OpenAPI document from inside the binary", async () => {
    const page = await fetch(`${server.url}/docs`);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain(`<script src="/docs/assets/swagger-ui-bundle.js">`);
    const bundle = await fetch(`${server.url}/docs/assets/swagger-ui-bundle.js`);
    expect(bundle.status).toBe(200);
    expect(await bundle.text()).toContain("SwaggerUIBundle");
    expect((await fetch(`${server.url}/docs/assets/swagger-ui.css`)).status).toBe(200);
    expect((await (await fetch(`${server.url}/docs/json`)).json()).paths["/admin/projects"]).toBeDefined();
  });

  test("prints the admin token once and saves it owner-only", async () => {
    const line = await waitFor(() => /admin token \(.*\): (ik_admin_\S+)/.exec(server.output()), {
      what: "the admin token line",
      detail: server.output,
    });
    expect(line[1]).toBe(server.adminToken);
    expect(server.output().split(server.adminToken).length - 1).toBe(1);
    const file = join(dataDir, "admin-token");
    expect(readFileSync(file, "utf8").trim()).toBe(server.adminToken);
    expect(statSync(file).mode & 0o777).toBe(0o600);
  });

  test("creates a project on the fresh store (embedded migrations ran)", async () => {
    const denied = await fetch(`${server.url}/admin/projects`, {
      method: "POST",
      body: JSON.stringify({ name: "Nope" }),
      headers: { "content-type": "application/json" },
    });
    expect(denied.status).toBe(401);
    const res = await admin("/admin/projects", {
      method: "POST",
      body: JSON.stringify({ name: "Smoke Test", slug: "smoke" }),
    });
    expect(res.status).toBe(201);
    expect(await res.json()).toMatchObject({ name: "Smoke Test", slug: "smoke" });
  });

  test("`inferd version` prints the stamped version", async () => {
    const r = await runInferd({ bin: [bin], args: ["version"], cwd: appDir });
    expect(r.code).toBe(0);
    expect(r.stdout.trim()).toBe(expectedVersion);
  });

  test("a second serve on the same data dir exits non-zero, naming the data dir", async () => {
    const r = await runInferd({ bin: [bin], args: ["serve", "--port", "0", "--data-dir", dataDir], cwd: appDir });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain(dataDir);
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
  });

  test("SIGTERM stops it with exit code 0 and a restart keeps the project", async () => {
    expect(await server.stop()).toBe(0);
    server = await startInferd({ bin: [bin], dataDir, cwd: appDir });
    const res = await admin("/admin/projects");
    expect(res.status).toBe(200);
    expect(((await res.json()) as { slug: string }[]).map((p) => p.slug)).toContain("smoke");
    expect(server.output()).not.toContain("admin token (");
  });

  test("ignores .env and bunfig.toml in the directory it starts in", async () => {
    const dir = tempDir("dotenv");
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, ".env"), "INFERD_LOG_LEVEL=debug\n");
    writeFileSync(join(dir, "preload.ts"), 'console.log("PRELOADED FROM BUNFIG");\n');
    writeFileSync(join(dir, "bunfig.toml"), 'preload = ["./preload.ts"]\n');
    const r = await runInferd({ bin: [bin], args: ["config"], cwd: dir });
    expect(r.code).toBe(0);
    expect(r.output).not.toContain("PRELOADED FROM BUNFIG");
    expect(r.stdout.split("\n").find((l) => l.startsWith("--log-level"))).toContain('"info"');
  });
});

describe("the compiled binary's built-in llama.cpp runtime (no llama-server installed)", () => {
  /** Model loads on a slow shared machine: a long deadline, polled, so fast machines finish fast. */
  const LOAD_TIMEOUT = 90_000;
  let llama: Inferd;
  let llamaData: string;

  afterAll(async () => {
    await llama?.stop().catch(() => {});
  });

  test("unpacks its embedded node-llama-cpp once and serves chat and embeddings", async () => {
    if ("unavailable" in built.llama)
      throw new Error(`linux-x64 was built without the runtime: ${built.llama.unavailable}`);
    const PATH = "/usr/bin:/bin";
    expect(Bun.which("llama-server", { PATH })).toBeNull();
    expect(Bun.which("nvidia-smi", { PATH })).toBeNull();
    const model = join(tempDir("gguf"), "tiny.gguf");
    writeTinyGguf(model);
    llamaData = join(tempDir("data"), "store");
    llama = await startInferd({ bin: [bin], dataDir: llamaData, cwd: appDir, env: { INFERD_LOCAL_AGENT: "1", PATH } });
    const call = (path: string, token: string, body?: unknown) =>
      fetch(
        `${llama.url}${path}`,
        body === undefined
          ? { headers: { authorization: `Bearer ${token}` } }
          : {
              method: "POST",
              body: JSON.stringify(body),
              headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
            },
      );
    const token = readFileSync(join(llamaData, "admin-token"), "utf8").trim();
    expect((await call("/admin/projects", token, { name: "Llama", slug: "llama" })).status).toBe(201);
    const key = await call("/admin/projects/llama/keys", token, { name: "live", type: "live" });
    expect(key.status).toBe(201);
    const live = ((await key.json()) as { secret: string }).secret;
    const created = await call("/admin/projects/llama/workloads", token, {
      name: "tiny",
      backend: "llamacpp",
      model_name: "tiny",
      config: { command: `llama-server -m ${model} -t 1 -c 256 --embedding` },
    });
    expect(created.status).toBe(201);
    const workload = (await created.json()) as { id: string; slug: string };

    type Assignment = { state: string; reason?: string };
    const ready = await waitFor(
      async () => {
        const w = (await (await call(`/admin/workloads/${workload.id}`, token)).json()) as {
          assignments: Assignment[];
        };
        const failed = w.assignments.find((a) => a.state === "failed");
        if (failed) throw new Error(`the assignment failed: ${failed.reason}\n--- output ---\n${llama.output()}`);
        return w.assignments.length > 0 && w.assignments.every((a) => a.state === "ready") ? w : undefined;
      },
      { what: "the llamacpp workload ready", timeoutMs: LOAD_TIMEOUT, intervalMs: 100, detail: llama.output },
    );
    expect(ready.assignments).toHaveLength(1);

    const chat = await call(`/endpoint/llama/${workload.slug}/v1/chat/completions`, live, {
      model: "tiny",
      max_tokens: 8,
      messages: [{ role: "user", content: "hello" }],
    });
    expect(chat.status).toBe(200);
    const completion = (await chat.json()) as { object: string; choices: { message: { content: string } }[] };
    expect(completion.object).toBe("chat.completion");
    expect(completion.choices[0].message.content.length).toBeGreaterThan(0);

    const emb = await call(`/endpoint/llama/${workload.slug}/v1/embeddings`, live, { input: "hello" });
    expect(emb.status).toBe(200);
    const vector = ((await emb.json()) as { data: { embedding: number[] }[] }).data[0].embedding;
    expect(vector.length).toBe(64);
    expect(vector.every((x) => Number.isFinite(x))).toBe(true);

    // Unpacked into the data dir (nothing beside the binary), complete, with executable native files.
    expect(readdirSync(appDir)).toEqual([TARGETS["linux-x64"].file]);
    const base = join(llamaData, "runtimes", "builtin-llama");
    expect(readdirSync(base)).toEqual([built.llama.id]);
    const dir = join(base, built.llama.id);
    expect(existsSync(join(dir, "llama-runner.js"))).toBe(true);
    const addon = join(dir, "node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/llama-addon.node");
    expect(statSync(addon).mode & 0o777).toBe(0o755);
  });

  test("a restart reuses the unpacked runtime", async () => {
    const marker = join(llamaData, "runtimes", "builtin-llama", (built.llama as { id: string }).id, ".inferd-pack");
    const before = statSync(marker).mtimeMs;
    expect(await llama.stop()).toBe(0);
    llama = await startInferd({
      bin: [bin],
      dataDir: llamaData,
      cwd: appDir,
      env: { INFERD_LOCAL_AGENT: "1", PATH: "/usr/bin:/bin" },
    });
    await waitFor(
      async () => {
        const list = (await (
          await fetch(`${llama.url}/admin/projects/llama/workloads`, {
            headers: { authorization: `Bearer ${llama.adminToken}` },
          })
        ).json()) as { id: string }[];
        const w = (await (
          await fetch(`${llama.url}/admin/workloads/${list[0].id}`, {
            headers: { authorization: `Bearer ${llama.adminToken}` },
          })
        ).json()) as { assignments: { state: string }[] };
        return w.assignments.length > 0 && w.assignments.every((a) => a.state === "ready");
      },
      { what: "the llamacpp workload ready again", timeoutMs: LOAD_TIMEOUT, intervalMs: 100, detail: llama.output },
    );
    expect(statSync(marker).mtimeMs).toBe(before);
    expect(readdirSync(join(llamaData, "runtimes", "builtin-llama"))).toEqual([(built.llama as { id: string }).id]);
  });
});
