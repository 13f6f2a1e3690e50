/**
 * Limits and quotas through the real server and the fake vLLM, on either store: per-key limits seen
 * by the official OpenAI SDK (429, x-ratelimit headers, its own retry), and token quotas that hold
 * across a restart.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import OpenAI from "openai";
import { cleanup } from "../helpers/proc";
import { startServing, type Serving } from "../helpers/serving";
import type { Engine } from "../helpers/postgres";

/** A live key of the server's project, with `limits` if given. */
const liveKey = async (s: Serving, limits?: Record<string, number | null>) =>
  (await (
    await s.admin(`/admin/projects/${s.project}/keys`, {
      body: { name: "limited", type: "live", ...(limits ? { limits } : {}) },
    })
  ).json()) as { id: string; secret: string; prefix: string };
/** A chat completion through workload `w`'s data plane with `key`. */
export const chat = (s: Serving, w: string, key: string, extra: Record<string, unknown> = {}) =>
  s.data(w, "/v1/chat/completions", {
    token: key,
    body: { messages: [{ role: "user", content: "one two three" }], ...extra },
  });

/** Per-key limits and token quotas across a restart, on `engine`'s store. */
export function operationsSuite(engine: Engine): void {
  const servers: Serving[] = [];
  afterAll(async () => {
    await Promise.all(servers.map((s) => s.stop().catch(() => 0)));
    await cleanup();
  });
  async function serve(env: Record<string, string> = {}, dataDir?: string) {
    const s = await startServing({ FAKE_LOAD_MS: "50", ...env }, [], dataDir, engine);
    servers.push(s);
    return s;
  }

  describe("per-key limits", () => {
    let s: Serving;
    let w: { id: string; slug: string };
    beforeAll(async () => {
      s = await serve({ FAKE_TOKEN_MS: "30" });
      w = await s.createWorkload({
        name: "lim",
        backend: "vllm",
        model_name: "lim",
        config: { command: "vllm serve lim" },
      });
      await s.waitState(w.id);
    });
    const sdk = (key: string, maxRetries: number) =>
      new OpenAI({ baseURL: `${s.url}/endpoint/${s.project}/${w.slug}/v1`, apiKey: key, maxRetries });

    test("requests per minute: over it the OpenAI SDK gets a RateLimitError with the headers OpenAI sends", async () => {
      const key = await liveKey(s, { rpm: 3 });
      const ok = await chat(s, w.slug, key.secret);
      expect(ok.status).toBe(200);
      expect(ok.headers.get("x-ratelimit-limit-requests")).toBe("3");
      expect(ok.headers.get("x-ratelimit-remaining-requests")).toBe("2");
      for (let i = 0; i < 2; i++) expect((await chat(s, w.slug, key.secret)).status).toBe(200);
      const err = await sdk(key.secret, 0)
        .chat.completions.create({ model: "default", messages: [{ role: "user", content: "one more" }] })
        .catch((e) => e);
      expect(err).toBeInstanceOf(OpenAI.RateLimitError);
      expect(err.status).toBe(429);
      expect(err.headers.get("x-ratelimit-remaining-requests")).toBe("0");
      expect(err.headers.get("x-ratelimit-reset-requests")).toMatch(/^(\d+m)?\d+(ms|s)$/);
      expect(Number(err.headers.get("retry-after"))).toBeGreaterThan(10); // 60 s / 3 requests
      expect(err.error).toMatchObject({ code: "rate_limited" });
    });

    test("requests at once: the SDK's own retry honours Retry-After and gets through once the first is done", async () => {
      const key = await liveKey(s, { max_concurrent: 1 });
      const long = chat(s, w.slug, key.secret, {
        stream: true,
        max_tokens: 12,
        messages: [{ role: "user", content: "a b c d e f g h i j k l" }],
      });
      const first = await long;
      const client = sdk(key.secret, 5);
      const started = Date.now();
      const [second] = await Promise.all([
        client.chat.completions.create({ model: "default", messages: [{ role: "user", content: "me too" }] }),
        first.text(),
      ]);
      expect(second.choices[0].message.content).toBeTruthy();
      expect(Date.now() - started).toBeGreaterThanOrEqual(900); // it waited for the Retry-After (1 s)
    });

    test("tokens per minute: once a request has used them up, the next is refused with the token headers", async () => {
      const key = await liveKey(s, { tpm: 10 });
      expect(
        (
          await chat(s, w.slug, key.secret, {
            messages: [{ role: "user", content: "many words in this prompt for many tokens" }],
          })
        ).status,
      ).toBe(200);
      const r = await chat(s, w.slug, key.secret);
      expect(r.status).toBe(429);
      expect(r.headers.get("x-ratelimit-limit-tokens")).toBe("10");
      expect(r.headers.get("x-ratelimit-remaining-tokens")).toBe("0");
    });

    test("limits change at once through the admin API and a key without limits sends no rate-limit headers", async () => {
      const key = await liveKey(s, { rpm: 1 });
      expect((await chat(s, w.slug, key.secret)).status).toBe(200);
      expect((await chat(s, w.slug, key.secret)).status).toBe(429);
      const patched = await (
        await s.admin(`/admin/keys/${key.id}`, { method: "PATCH", body: { limits: { rpm: null } } })
      ).json();
      expect(patched.limits).toMatchObject({ rpm: null });
      const free = await chat(s, w.slug, key.secret);
      expect(free.status).toBe(200);
      expect(free.headers.get("x-ratelimit-limit-requests")).toBeNull();
    });
  });

  test("token quotas per day hold across a restart, for a key and for its project", async () => {
    const first = await serve();
    const w = await first.createWorkload({
      name: "q",
      backend: "vllm",
      model_name: "q",
      config: { command: "vllm serve q" },
    });
    await first.waitState(w.id);
    const key = await liveKey(first, { tokens_per_day: 20 });
    for (let i = 0; i < 10; i++) {
      const r = await chat(first, w.slug, key.secret);
      if (r.status === 429) break;
      expect(r.status).toBe(200);
    }
    const over = await chat(first, w.slug, key.secret);
    expect(over.status).toBe(429);
    expect((await over.json()).error.code).toBe("quota_exceeded");
    await first.stop();
    const second = await serve(first.storeEnv, first.dataDir);
    try {
      await second.waitState(w.id);
      const still = await chat(second, w.slug, key.secret);
      expect(still.status).toBe(429);
      expect((await still.json()).error.message).toContain("daily token quota of 20");
      // A project quota covers every key of the project.
      await second.admin(`/admin/projects/${second.project}`, {
        method: "PATCH",
        body: { limits: { tokens_per_day: 1 } },
      });
      const other = await liveKey(second);
      const r = await chat(second, w.slug, other.secret);
      expect(r.status).toBe(429);
      expect((await r.json()).error.message).toContain("project's daily token quota");
    } finally {
      await second.stop();
    }
  });
}
