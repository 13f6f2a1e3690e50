/**
 * Settings changed while serving (issue 24, item 8), against a real `inferd serve` with its local
 * agent on fake GPUs, real HTTPS webhook receivers on loopback and the fake Hugging Face hub:
 * `GET /admin/settings` lists every setting of src/config.ts with its flag, env and source; each
 * runtime setting changed with `PATCH /admin/settings` takes effect on the next request (private
 * webhooks, the retry schedule, default key limits, the log level, the HF token); bad values are 400
 * naming the setting; a stored value survives a restart and Reset returns to the flag; every change
 * is audited (a secret as set/unset only). Hints name the command inferd was started with.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { loadConfig, SETTINGS } from "../src/config";
import { openStore } from "../src/db";
import { Settings } from "../src/settings/service";
import { cleanup, runInferd, tempDir, waitFor } from "./helpers/proc";
import { commandPrefix } from "../src/invocation";
import { startServing, type Serving } from "./helpers/serving";
import { makeTestPki, type TestPki } from "./fixtures/tls";
import { startReceiver, type Receiver } from "./fixtures/receiver";
import { startFakeHub, type FakeHub } from "./fixtures/hf-hub";
import { ggufRepo } from "./fixtures/hf-repos";

const GATED = "inferd-test/Gated-GGUF";
const TOKEN = "hf_settings_test_token";
let pki: TestPki;
let hub: FakeHub;
let receiver: Receiver;
let s: Serving;
let env: Record<string, string>;
const ARGS = ["--webhook-retry-schedule", "10m,20m"];
let w: { id: string; slug: string };

type View = {
  key: string;
  flag: string;
  env: string;
  value: unknown;
  default: unknown;
  source: string;
  runtime: boolean;
  secret: boolean;
  updated_by: string | null;
};
const settings = async () => (await (await s.admin("/admin/settings")).json()) as { command: string; settings: View[] };
const setting = async (key: string) => (await settings()).settings.find((v) => v.key === key)!;
const patch = (body: Record<string, unknown>) => s.admin("/admin/settings", { method: "PATCH", body });
const addHook = (url: string) => s.admin(`/admin/workloads/${w.id}/webhooks`, { body: { url } });

beforeAll(async () => {
  const src = tempDir("hub-src");
  pki = makeTestPki(tempDir("pki"), ["localhost"]);
  [hub, receiver] = await Promise.all([
    startFakeHub({
      repos: {
        [GATED]: { ...ggufRepo(join(src, "gated"), { name: "Gated", files: ["Gated-Q4_K_M.gguf"] }), gated: true },
      },
      tokens: { [TOKEN]: "*" },
    }),
    startReceiver({ pki }),
  ]);
  env = { HF_ENDPOINT: hub.url, INFERD_WEBHOOK_CA_FILE: pki.caFile };
  s = await startServing(env, ARGS);
  w = await s.createWorkload({
    name: "hooks",
    backend: "vllm",
    model_name: "hook-model",
    config: { command: "vllm serve hook-model" },
  });
  await s.waitState(w.id);
}, 90_000);
afterAll(async () => {
  await s?.stop().catch(() => 0);
  await Promise.all([hub?.stop(), receiver?.close()]);
  await cleanup();
});

describe("the settings in force", () => {
  test("every setting of SETTINGS is listed with its flag, env, value and where it comes from; secrets only as set/unset", async () => {
    const { command, settings: list } = await settings();
    expect(command).toBe("bun src/main.ts");
    expect(list.map((v) => v.key)).toEqual(Object.keys(SETTINGS));
    for (const v of list) {
      const def = SETTINGS[v.key as keyof typeof SETTINGS];
      expect([v.flag, v.env]).toEqual([def.flag, def.env]);
    }
    expect(list.find((v) => v.key === "webhookRetrySchedule")).toMatchObject({
      value: "10m,20m",
      default: "1m,5m,15m,1h,6h",
      source: "flag",
      runtime: true,
    });
    expect(list.find((v) => v.key === "logLevel")).toMatchObject({ value: "warn", source: "env", runtime: true });
    expect(list.find((v) => v.key === "queueMax")).toMatchObject({ value: 1000, source: "default", runtime: false });
    expect(list.find((v) => v.key === "hfToken")).toMatchObject({
      flag: "--hf-token",
      env: "HF_TOKEN",
      value: "unset",
      secret: true,
      runtime: true,
    });
    expect(
      list
        .filter((v) => v.runtime)
        .map((v) => v.key)
        .sort(),
    ).toEqual(["allowPrivateWebhooks", "defaultKeyLimits", "hfToken", "logLevel", "webhookRetrySchedule"]);
  });

  test("bad values are 400 naming the setting; a setting that needs a restart says how; nothing is stored", async () => {
    const bad = async (body: Record<string, unknown>, code: string, field: string, words: string) => {
      const r = await patch(body);
      expect(r.status).toBe(400);
      const { error } = await r.json();
      expect(error).toMatchObject({ code, field });
      expect(error.message).toContain(words);
    };
    await bad({ webhookRetrySchedule: "soon" }, "validation_error", "webhookRetrySchedule", '"soon" is not a duration');
    await bad(
      { allowPrivateWebhooks: "maybe" },
      "validation_error",
      "allowPrivateWebhooks",
      "--allow-private-webhooks must be true or false",
    );
    await bad({ logLevel: "loud" }, "validation_error", "logLevel", "must be one of error, warn, info, debug");
    await bad({ defaultKeyLimits: "rpm=fast" }, "validation_error", "defaultKeyLimits", "rpm must be a whole number");
    await bad({ noSuchThing: 1 }, "validation_error", "noSuchThing", 'there is no setting "noSuchThing"');
    await bad({ port: 9000 }, "restart_required", "port", "restart it with bun src/main.ts serve --port");
    // One bad value refuses the whole change.
    await bad(
      { logLevel: "debug", webhookRetrySchedule: "" },
      "validation_error",
      "webhookRetrySchedule",
      "is not a duration",
    );
    expect((await setting("logLevel")).value).toBe("warn");
    expect((await s.admin("/admin/settings", { method: "PATCH", body: ["logLevel"] })).status).toBe(400);
  });
});

describe("runtime settings take effect without a restart", () => {
  test("private webhooks: a loopback receiver is refused naming --allow-private-webhooks, then accepted and pinged after the change", async () => {
    const refused = await addHook(receiver.url("/hook"));
    expect(refused.status).toBe(400);
    const { error } = await refused.json();
    expect(error.code).toBe("invalid_webhook_url");
    expect(error.message).toContain("127.0.0.1, a loopback, private or otherwise non-public address");
    expect(error.message).toContain("--allow-private-webhooks (INFERD_ALLOW_PRIVATE_WEBHOOKS");
    expect((await (await s.admin("/admin/info")).json()).allow_private_webhooks).toBe(false);

    expect((await patch({ allowPrivateWebhooks: true })).status).toBe(200);
    const added = await addHook(receiver.url("/hook"));
    expect(added.status).toBe(201);
    const hook = await added.json();
    const ping = await (await s.admin(`/admin/webhooks/${hook.id}/test`, { method: "POST" })).json();
    expect(ping).toMatchObject({ ok: true, status_code: 200 });
    expect((await (await s.admin("/admin/info")).json()).allow_private_webhooks).toBe(true);
    expect(await setting("allowPrivateWebhooks")).toMatchObject({
      value: true,
      source: "dashboard",
      updated_by: "admin token",
    });
  });

  test("retry schedule: the webhooks API shows the one in force, and a failed delivery is retried on it", async () => {
    const before = await (await s.admin("/admin/webhooks/delivery")).json();
    expect(before).toMatchObject({
      retry_schedule: "10m,20m",
      retry_delays_ms: [600_000, 1_200_000],
      attempts: 3,
      secret_storage: "plaintext",
    });
    expect((await patch({ webhookRetrySchedule: "200ms, 300ms" })).status).toBe(200);
    expect(await (await s.admin("/admin/webhooks/delivery")).json()).toMatchObject({
      retry_schedule: "200ms, 300ms",
      retry_delays_ms: [200, 300],
      attempts: 3,
    });
    // The receiver fails once: with the flag's 10 minutes the retry would not come within this test.
    const seen = receiver.requests().length;
    receiver.setBehaviour((_req, i) => ({ status: i === seen ? 500 : 200, body: "" }));
    const r = await s.data(w.slug, "/jobs", {
      body: { kind: "chat", body: { messages: [{ role: "user", content: "retry me" }] } },
    });
    expect(r.status).toBe(202);
    const { job_id } = await r.json();
    await receiver.waitForRequests(seen + 2, 30_000);
    const job = await waitFor(
      async () => {
        const j = await (await s.data(w.slug, `/jobs/${job_id}`)).json();
        return j.deliveries?.[0]?.state === "delivered" ? j : undefined;
      },
      { what: "the retried delivery", timeoutMs: 20_000 },
    );
    expect(job.deliveries[0].attempts).toBe(2);
  });

  test("default key limits: a key without limits of its own gets them on its next request; Reset lifts them", async () => {
    const chat = () =>
      s.data(w.slug, "/v1/chat/completions", {
        body: { model: "hook-model", messages: [{ role: "user", content: "hi" }] },
      });
    expect((await chat()).headers.get("x-ratelimit-limit-requests")).toBeNull();
    expect((await patch({ defaultKeyLimits: "rpm=1" })).status).toBe(200);
    const first = await chat();
    expect(first.status).toBe(200);
    expect(first.headers.get("x-ratelimit-limit-requests")).toBe("1");
    const second = await chat();
    expect(second.status).toBe(429);
    expect((await second.json()).error.message).toContain("1 requests per minute");
    expect((await patch({ defaultKeyLimits: null })).status).toBe(200);
    const after = await chat();
    expect(after.status).toBe(200);
    expect(after.headers.get("x-ratelimit-limit-requests")).toBeNull();
  });

  test("log level: what the log prints follows the setting", async () => {
    const lines = () =>
      s
        .output()
        .split("\n")
        .filter((l) => / info  setting --webhook-retry-schedule changed/.test(l)).length;
    // The log is one ordered stream: once a later line is read, an earlier one would have been too.
    const printed = (n: number) =>
      waitFor(() => lines() >= n, { what: "the info line of a change", detail: () => s.output() }).then(() => lines());
    const quiet = lines();
    expect((await patch({ webhookRetrySchedule: "200ms,400ms" })).status).toBe(200); // warn: not written
    expect((await patch({ logLevel: "info" })).status).toBe(200);
    expect((await patch({ webhookRetrySchedule: "200ms,300ms" })).status).toBe(200);
    expect(await printed(quiet + 1)).toBe(quiet + 1);
    expect((await patch({ logLevel: "error" })).status).toBe(200);
    expect((await patch({ webhookRetrySchedule: "200ms,500ms" })).status).toBe(200); // error: not written
    expect((await patch({ logLevel: "info" })).status).toBe(200);
    expect((await patch({ webhookRetrySchedule: "200ms,300ms" })).status).toBe(200);
    expect(await printed(quiet + 2)).toBe(quiet + 2);
    expect(s.output()).not.toContain('now "200ms,500ms"');
    expect(s.output()).not.toContain('now "200ms,400ms"');
  });

  test("HF token: a gated repo fails without it, the next pull after setting it sends it and succeeds; the token is never shown", async () => {
    const pull = async () =>
      (await (await s.admin("/admin/models", { body: { source: `hf:${GATED}:Q4_K_M` } })).json()) as { id: string };
    const model = async (id: string, state: string) =>
      waitFor(
        async () => {
          const m = await (await s.admin(`/admin/models/${id}`)).json();
          return m.state === state ? m : undefined;
        },
        { what: `model ${state}`, timeoutMs: 30_000, detail: () => s.output() },
      );
    const failed = await model((await pull()).id, "failed");
    expect(failed.reason).toContain("gated or private");
    hub.clearRequests();
    expect((await patch({ hfToken: TOKEN })).status).toBe(200);
    await model((await pull()).id, "ready");
    expect(hub.requests().some((r) => r.path.startsWith(`/api/models/${GATED}`) && r.authorization)).toBe(true);
    expect(await setting("hfToken")).toMatchObject({ value: "set", source: "dashboard" });
    expect(JSON.stringify(await settings())).not.toContain(TOKEN);
    expect(await (await s.admin("/admin/audit?limit=1000")).text()).not.toContain(TOKEN);
  });
});

describe("a part that follows a setting (the limiter's default key limits)", () => {
  test("hears the value in force, then each change; a reading of the store that changes nothing stays quiet", async () => {
    const dir = tempDir("settings-follow");
    const store = openStore(join(dir, "inferd.db"));
    try {
      const { config } = loadConfig([], { INFERD_DATA_DIR: dir, INFERD_DEFAULT_KEY_LIMITS: "rpm=60" });
      const settings = new Settings(store.db, config);
      await settings.load();
      const heard: string[][] = [];
      settings.follow("defaultKeyLimits", (items) => heard.push(items));
      expect(heard).toEqual([["rpm=60"]]);
      await settings.change({ defaultKeyLimits: "rpm=5,max_concurrent=2" });
      expect(heard).toEqual([["rpm=60"], ["rpm=5", "max_concurrent=2"]]);
      await settings.load(); // as a cluster's hosts read again every 30 s: the same items
      expect(heard).toHaveLength(2);
      await settings.change({ defaultKeyLimits: null });
      expect(heard.at(-1)).toEqual(["rpm=60"]);
    } finally {
      await store.close();
    }
  });
});

describe("stored, audited, kept across a restart, reset to the flag", () => {
  test("every change is in the audit log with who made it and the value before and after", async () => {
    const { entries } = await (await s.admin("/admin/audit?action=setting&limit=1000")).json();
    const of = (key: string) => entries.filter((e: { target: { id: string } }) => e.target.id === key);
    expect(of("allowPrivateWebhooks")[0]).toMatchObject({
      action: "setting.change",
      actor: { type: "admin" },
      target: { type: "setting", label: "--allow-private-webhooks" },
      diff: { value: { from: false, to: true } },
    });
    expect(of("defaultKeyLimits")[0]).toMatchObject({
      action: "setting.reset",
      diff: { value: { from: ["rpm=1"], to: [] } },
    });
    expect(of("hfToken")[0]).toMatchObject({ action: "setting.change", diff: { value: { from: "unset", to: "set" } } });
  });

  test("a restart keeps the stored values; Reset returns to the flag's", async () => {
    const dataDir = s.dataDir;
    await s.stop();
    s = await startServing({ ...env, ...s.storeEnv }, ARGS, dataDir);
    expect(await setting("webhookRetrySchedule")).toMatchObject({ value: "200ms,300ms", source: "dashboard" });
    expect(await setting("allowPrivateWebhooks")).toMatchObject({ value: true, source: "dashboard" });
    expect((await (await s.admin("/admin/webhooks/delivery")).json()).retry_delays_ms).toEqual([200, 300]);
    const reset = await patch({ webhookRetrySchedule: null, allowPrivateWebhooks: null });
    expect(reset.status).toBe(200);
    expect(await setting("webhookRetrySchedule")).toMatchObject({ value: "10m,20m", source: "flag", updated_by: null });
    expect(await setting("allowPrivateWebhooks")).toMatchObject({ value: false, source: "default" });
    expect((await (await s.admin("/admin/webhooks/delivery")).json()).retry_delays_ms).toEqual([600_000, 1_200_000]);
    expect((await addHook(receiver.url("/again"))).status).toBe(400);
  }, 90_000);
});

describe("hints use the command the user ran", () => {
  test("the binary, the start script, a linked bin and bun on the file each get their own prefix", () => {
    const from = (main: string, argv1: string | undefined, script?: string) =>
      commandPrefix({ main, argv1, script, cwd: "/repo" });
    expect(from("/$bunfs/root/inferd-linux-x64", "/usr/local/bin/inferd")).toBe("inferd");
    expect(from("B:/~BUN/root/inferd-windows-x64.exe", undefined)).toBe("inferd");
    expect(from("/repo/src/main.ts", "/repo/src/main.ts", "start")).toBe("bun run start --");
    expect(from("/repo/src/main.ts", "/home/me/.bun/bin/inferd")).toBe("inferd");
    expect(from("/repo/src/main.ts", "/repo/src/main.ts")).toBe("bun src/main.ts");
    expect(from("/elsewhere/src/main.ts", "/elsewhere/src/main.ts")).toBe("bun /elsewhere/src/main.ts");
  });

  test("the CLI's hints and the server's start lines print it", async () => {
    const r = await runInferd({ args: ["frobnicate"] });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('unknown command "frobnicate" (see bun src/main.ts help)');
    expect(s.output()).toContain("to serve your network, restart with bun src/main.ts serve --host 0.0.0.0");
  });
});
