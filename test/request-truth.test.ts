import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import OpenAI from "openai";
import { join } from "node:path";
import { cleanup, tempDir, waitFor } from "./helpers/proc";
import { writeTinyGguf } from "./fixtures/gguf";
import { startServing, type Serving } from "./helpers/serving";

/**
 * Every request's record says what happened to it, against a real `inferd serve` with fake vLLM and
 * llama-server runtimes: a runtime's error keeps the runtime's own reason and marks the failing span;
 * a key's refusals (its limits, a switched-off route) are recorded, counted for the key and in
 * `/metrics`, and give the key's concurrency slot back; a request that fell back is one record on
 * the workload that answered, naming the one it fell back from (which counts no error); the
 * playground's tries are in the inspector; a whole answer has no time to first token.
 */
let s: Serving;
let base = "";

/** A row of a request list, as far as these tests read it. */
interface Row {
  id: string;
  request_id: string | null;
  status: number;
  error_code: string | null;
  error_message: string | null;
  workload_id: string | null;
  source: string | null;
  fell_back_from: { workload_id: string; status: number; error_code: string | null }[];
  key: { id: string } | null;
  ttft_ms: number | null;
  total_ms: number;
}

/** The project's requests matching `query`, waiting until `until` holds (records are written about once a second). */
async function projectRequests(query: string, until: (rows: Row[]) => boolean, what: string): Promise<Row[]> {
  let rows: Row[] = [];
  await waitFor(
    async () => {
      const r = await s.admin(`/admin/projects/${s.project}/requests?${query}`);
      expect(r.status).toBe(200);
      rows = ((await r.json()) as { requests: Row[] }).requests;
      return until(rows) ? true : undefined;
    },
    { what },
  );
  return rows;
}

/** A new key of the project with `limits`: its id and secret. */
async function keyWith(name: string, limits: Record<string, unknown>): Promise<{ id: string; secret: string }> {
  const r = await s.admin(`/admin/projects/${s.project}/keys`, {
    method: "POST",
    body: { name, type: "live", limits },
  });
  expect(r.status).toBe(201);
  const k = (await r.json()) as { id: string; secret: string };
  return { id: k.id, secret: k.secret };
}

/** A tiny GGUF for the fake llama-server (it checks the file's magic). */
function gguf(): string {
  const path = join(tempDir("gguf"), "tiny.gguf");
  writeTinyGguf(path);
  return path;
}

let llama = { id: "", slug: "" };
let vllm = { id: "", slug: "" };

beforeAll(async () => {
  s = await startServing();
  base = `${s.url}/endpoint/${s.project}/v1`;
  [llama, vllm] = await Promise.all([
    s.createWorkload({
      name: "truth-llama",
      backend: "llamacpp",
      model_name: "org/truth-llama",
      config: { command: `llama-server -m ${gguf()}` },
    }),
    s.createWorkload({
      name: "truth-vllm",
      backend: "vllm",
      model_name: "org/truth-vllm",
      config: { command: "vllm serve org/truth-vllm" },
    }),
  ]);
  await Promise.all([s.waitState(llama.id), s.waitState(vllm.id)]);
}, 120_000);

afterAll(async () => {
  await s?.stop();
  await cleanup();
});

describe("a failed request says why", () => {
  test("a runtime's 400 keeps the runtime's own message and code, and marks the upstream span", async () => {
    for (const w of [llama, vllm]) {
      const r = await s.data(w.slug, "/v1/chat/completions", {
        body: { model: "default" },
        headers: { "x-request-id": `truth-400-${w.slug}` },
      });
      expect(r.status).toBe(400);
    }
    const rows = await projectRequests(
      "status=400",
      (rows) => rows.filter((r) => r.request_id?.startsWith("truth-400-")).length === 2,
      "both 400s recorded",
    );
    const byReq = new Map(rows.map((r) => [r.request_id, r]));
    const l = byReq.get(`truth-400-${llama.slug}`)!;
    // llama-server's own words (tools/server/server.cpp) and type; vLLM's pydantic message and Python error name.
    expect(l.error_message).toBe("'messages' is required");
    expect(l.error_code).toBe("invalid_request_error");
    expect(l.workload_id).toBe(llama.id);
    const v = byReq.get(`truth-400-${vllm.slug}`)!;
    expect(v.error_message).toContain("messages");
    expect(v.error_code).toBe("BadRequestError");
    // No token came: no time to first token.
    expect(v.ttft_ms).toBeNull();
    const detail = (await (await s.admin(`/admin/requests/${v.id}`)).json()) as {
      spans: { name: string; attrs?: Record<string, unknown> }[];
    };
    expect(detail.spans.find((sp) => sp.name === "upstream")?.attrs?.error).toBe(400);
    expect(detail.spans.some((sp) => sp.name === "ttft")).toBe(false);
  });

  test("a streamed answer has a time to first token; a whole answer has none", async () => {
    const openai = new OpenAI({ baseURL: base, apiKey: s.live, maxRetries: 0 });
    const stream = await openai.chat.completions.create(
      { model: "org/truth-vllm", stream: true, messages: [{ role: "user", content: "stream" }] },
      { headers: { "x-request-id": "truth-stream" } },
    );
    for await (const _ of stream);
    await openai.chat.completions.create(
      { model: "org/truth-vllm", messages: [{ role: "user", content: "whole" }] },
      { headers: { "x-request-id": "truth-whole" } },
    );
    const rows = await projectRequests(
      `workload=${vllm.id}&status=ok`,
      (rows) => ["truth-stream", "truth-whole"].every((id) => rows.some((r) => r.request_id === id)),
      "both answers recorded",
    );
    const streamed = rows.find((r) => r.request_id === "truth-stream")!;
    expect(streamed.ttft_ms).not.toBeNull();
    expect(streamed.ttft_ms!).toBeLessThanOrEqual(streamed.total_ms);
    expect(rows.find((r) => r.request_id === "truth-whole")!.ttft_ms).toBeNull();
  });
});

describe("a key's refusals are seen", () => {
  test("requests over a key's rpm are recorded with the reason, counted in its usage and in /metrics", async () => {
    const key = await keyWith("burst", { rpm: 2 });
    const openai = new OpenAI({ baseURL: base, apiKey: key.secret, maxRetries: 0 });
    const outcomes = await Promise.all(
      Array.from({ length: 5 }, (_, i) =>
        openai.chat.completions
          .create({ model: "org/truth-llama", messages: [{ role: "user", content: `b${i}` }] })
          .then(
            () => 200,
            (e: { status?: number }) => e.status ?? 0,
          ),
      ),
    );
    expect(outcomes.filter((x) => x === 429).length).toBe(3);
    const refused = await projectRequests(
      `key=${key.id}&status=429`,
      (rows) => rows.length === 3,
      "three refusals recorded",
    );
    for (const r of refused) {
      expect(r.error_code).toBe("rate_limited");
      expect(r.error_message).toBe("this key may make 2 requests per minute");
      expect(r.key?.id).toBe(key.id);
      // Refused before any workload was chosen.
      expect(r.workload_id).toBeNull();
    }
    const metrics = await (await s.admin("/metrics")).text();
    const line = metrics
      .split("\n")
      .find((l) => l.startsWith("inferd_requests_refused_total{") && l.includes(`key="${key.id}"`));
    expect(line).toContain('code="rate_limited"');
    expect(line?.endsWith(" 3")).toBe(true);
    // The key's usage counts them as errors (the usage page by key).
    await waitFor(
      async () => {
        const u = (await (await s.admin("/admin/usage?group_by=key")).json()) as {
          rows: { id: string; requests: number; errors: number }[];
        };
        const mine = u.rows.filter((r) => r.id === key.id);
        const errors = mine.reduce((n, r) => n + r.errors, 0);
        return errors === 3 ? true : undefined;
      },
      { what: "3 errors in the key's usage" },
    );
  });

  test("a request refused by a switched-off route gives its key's concurrency slot back", async () => {
    const key = await keyWith("one-at-a-time", { max_concurrent: 1 });
    const r = await s.admin(`/admin/workloads/${llama.id}/endpoints`, {
      method: "PATCH",
      body: { embeddings: false },
    });
    expect(r.status).toBe(200);
    for (let i = 0; i < 3; i++) {
      const off = await s.data(llama.slug, "/v1/embeddings", { body: { input: "x" }, token: key.secret });
      expect(off.status).toBe(409);
    }
    // With the slot leaked, this would be a 429 "this key may have 1 request in flight at once".
    const ok = await s.data(llama.slug, "/v1/chat/completions", {
      body: { messages: [{ role: "user", content: "after" }] },
      token: key.secret,
    });
    expect(ok.status).toBe(200);
    const rows = await projectRequests(
      `key=${key.id}&status=409`,
      (rows) => rows.length === 3,
      "the switched-off route's refusals recorded",
    );
    expect(rows[0].error_code).toBe("endpoint_disabled");
    expect(rows[0].workload_id).toBe(llama.id);
    expect(rows[0].error_message).toContain("embeddings endpoint");
  });
});

describe("a fallback is one record", () => {
  test("the request that fell back is recorded once, on the workload that answered, naming the one it left", async () => {
    const backup = await s.createWorkload({
      name: "truth-backup",
      backend: "vllm",
      model_name: "org/truth-backup",
      config: { command: "vllm serve org/truth-backup" },
    });
    const main = await s.createWorkload({
      name: "truth-main",
      backend: "vllm",
      model_name: "org/truth-main",
      fallbacks: [backup.slug],
      config: { command: "vllm serve org/truth-main" },
    });
    await Promise.all([s.waitState(backup.id), s.waitState(main.id)]);
    expect((await s.admin(`/admin/workloads/${main.id}/stop`, { method: "POST" })).status).toBe(200);
    await waitFor(
      async () => ((await s.workload(main.id)).assignments.every((a) => a.state !== "ready") ? true : undefined),
      { what: "main stopped" },
    );
    const openai = new OpenAI({ baseURL: base, apiKey: s.live, maxRetries: 0 });
    const got = await openai.chat.completions.create(
      { model: "org/truth-main", messages: [{ role: "user", content: "covered" }] },
      { headers: { "x-request-id": "truth-fallback" } },
    );
    expect(got.model).toBe("org/truth-backup");
    const rows = await projectRequests("q=truth-fallback", (rows) => rows.length > 0, "the fallback's record");
    expect(rows.length).toBe(1);
    const [r] = rows;
    expect(r.status).toBe(200);
    expect(r.error_code).toBeNull();
    expect(r.workload_id).toBe(backup.id);
    expect(r.fell_back_from).toEqual([{ workload_id: main.id, status: 503, error_code: "workload_unavailable" }]);
    // The stopped workload's list has no record of it, and it counts no error for it.
    const mainList = (await (await s.admin(`/admin/workloads/${main.id}/requests?q=truth-fallback`)).json()) as {
      requests: Row[];
    };
    expect(mainList.requests).toEqual([]);
    expect((await s.workload(main.id)).usage.errors).toBe(0);
  });
});

describe("the playground's requests", () => {
  test("a playground try is in the inspector under the id its answer carried, marked as the playground's", async () => {
    const r = await s.admin(`/admin/workloads/${vllm.id}/chat`, {
      method: "POST",
      body: { messages: [{ role: "user", content: "from the playground" }] },
    });
    expect(r.status).toBe(200);
    const id = r.headers.get("x-request-id")!;
    expect(id).toMatch(/^req_/);
    let got: Response | undefined;
    await waitFor(async () => ((got = await s.admin(`/admin/requests/${id}`)).status === 200 ? true : undefined), {
      what: "the playground request's record",
    });
    const rec = (await got!.json()) as Row;
    expect(rec.source).toBe("playground");
    expect(rec.workload_id).toBe(vllm.id);
    expect(rec.key).toBeNull();
    const listed = await projectRequests("source=playground", (rows) => rows.some((x) => x.id === id), "listed");
    expect(listed.every((x) => x.source === "playground")).toBe(true);
  });
});
