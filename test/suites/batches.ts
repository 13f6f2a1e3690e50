import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import OpenAI, { toFile } from "openai";
import Stripe from "stripe";
import { Webhook } from "standardwebhooks";
import { cleanup, tempDir, waitFor } from "../helpers/proc";
import { startServing, type Serving } from "../helpers/serving";
import { makeTestPki, type TestPki } from "../fixtures/tls";
import { startReceiver, type Receiver } from "../fixtures/receiver";
import type { Engine } from "../helpers/postgres";
import { sql } from "drizzle-orm";
import { exec } from "../../src/db/raw";
import { openPgStore, openStore } from "../../src/db";
import { dataPaths } from "../../src/datadir";

/** One line of a batch input file. */
const line = (custom_id: string, url: string, body: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
  JSON.stringify({ custom_id, method: "POST", url, body, ...extra });
const chatLine = (custom_id: string, model: string, text: string, extra: Record<string, unknown> = {}) =>
  line(custom_id, "/v1/chat/completions", { model, messages: [{ role: "user", content: text }], ...extra });

/** The JSON lines of a downloaded file. */
async function linesOf(openai: OpenAI, fileId: string): Promise<any[]> {
  const text = await (await openai.files.content(fileId)).text();
  return text
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l));
}

/** Polls `batches.retrieve` until the batch reaches `status`. */
function settled(openai: OpenAI, id: string, status: string, s: Serving, timeoutMs = 60_000) {
  return waitFor(
    async () => {
      const b = await openai.batches.retrieve(id);
      if (["completed", "failed", "cancelled", "expired"].includes(b.status) && b.status !== status)
        throw new Error(`batch ended ${b.status}, not ${status}: ${JSON.stringify(b)}`);
      return b.status === status ? b : undefined;
    },
    { what: `batch ${id} ${status}`, timeoutMs, intervalMs: 100, detail: () => s.output() },
  );
}

/** Moves a batch's completion window into the past, in the running server's store (as 24 hours passing would). */
async function pastWindow(srv: Serving, id: string): Promise<void> {
  const url = srv.storeEnv.INFERD_DATABASE_URL;
  const store = url ? await openPgStore(url, 1) : openStore(dataPaths(srv.dataDir).db);
  try {
    await exec(
      store.db,
      sql`UPDATE batches SET expires_at = ${new Date(Date.now() - 1000).toISOString()} WHERE id = ${id}`,
    );
  } finally {
    await store.close();
  }
}

/** The status and error of a call the SDK rejects. */
async function refusal(p: Promise<unknown>): Promise<{ status: number; code: string; message: string }> {
  const e = (await p.then(
    () => undefined,
    (err) => err,
  )) as InstanceType<typeof OpenAI.APIError> | undefined;
  if (!e) throw new Error("the call was accepted");
  return { status: e.status ?? 0, code: String(e.code), message: e.message };
}

/**
 * The OpenAI Files and Batch APIs with the official `openai` SDK on a real inferd (local agent, fake
 * vLLM runtimes): upload, batches on the project base (routed by model) and on a workload's base,
 * output and error files in OpenAI's line format, validation naming the line, cancel, list, the
 * signed batch end event, and a kill -9 mid-batch after which every line is answered exactly once.
 */
export function batchesSuite(engine: Engine): void {
  let pki: TestPki;
  let s: Serving;
  let rcv: Receiver;
  let hookSecret: string;
  let chat: { id: string; slug: string };
  let slow: { id: string; slug: string };
  let openai: OpenAI;
  const receivers: Receiver[] = [];

  beforeAll(async () => {
    pki = makeTestPki(tempDir("pki"), ["localhost"]);
    rcv = await startReceiver({ pki });
    receivers.push(rcv);
    s = await startServing(
      {
        INFERD_ALLOW_PRIVATE_WEBHOOKS: "1",
        INFERD_WEBHOOK_CA_FILE: pki.caFile,
        INFERD_WEBHOOK_RETRY_SCHEDULE: "200ms,200ms,200ms",
        FAKE_GPUS: "3x NVIDIA GeForce RTX 4090:24564",
        FAKE_DELAY_MS: "60",
      },
      [],
      undefined,
      engine,
    );
    chat = await s.createWorkload({
      name: "chat",
      backend: "vllm",
      model_name: "chat-model",
      aliases: ["fast"],
      config: { command: "vllm serve chat-model --max-model-len 64" },
    });
    const embed = await s.createWorkload({
      name: "embed",
      backend: "vllm",
      model_name: "embed-model",
      config: { command: "vllm serve embed-model" },
    });
    slow = await s.createWorkload({
      name: "slow",
      backend: "vllm",
      model_name: "slow-model",
      config: { command: "vllm serve slow-model" },
    });
    const hook = await (
      await s.admin(`/admin/workloads/${chat.id}/webhooks`, { body: { url: rcv.url("/batches") } })
    ).json();
    hookSecret = hook.secret;
    await (await s.admin(`/admin/workloads/${slow.id}/webhooks`, { body: { url: rcv.url("/slow") } })).json();
    for (const w of [chat, embed]) await s.waitState(w.id);
    const ready = await s.waitState(slow.id);
    // One request at a time on "slow": a batch there is still mostly queued when it is cancelled.
    expect(
      (await s.admin(`/admin/assignments/${ready.assignments[0].id}`, { method: "PATCH", body: { concurrency: 1 } }))
        .status,
    ).toBe(200);
    openai = new OpenAI({ baseURL: `${s.url}/endpoint/${s.project}/v1`, apiKey: s.live, maxRetries: 0 });
  });
  afterAll(async () => {
    await s?.stop();
    await Promise.all(receivers.map((r) => r.close()));
    await cleanup();
  });

  const upload = async (text: string, name = "in.jsonl") =>
    openai.files.create({ file: await toFile(Buffer.from(text), name), purpose: "batch" });

  describe("files", () => {
    test("upload, retrieve, list, download and delete a JSONL file", async () => {
      const text = `${chatLine("a", "chat-model", "hello")}\n${chatLine("b", "chat-model", "there")}\n`;
      const f = await upload(text);
      expect(f).toMatchObject({
        object: "file",
        bytes: Buffer.byteLength(text),
        filename: "in.jsonl",
        purpose: "batch",
        status: "processed",
      });
      expect(f.id).toMatch(/^file-/);
      expect(Math.abs(f.created_at - Date.now() / 1000)).toBeLessThan(60);
      expect(await openai.files.retrieve(f.id)).toEqual(f);
      const listed = [];
      for await (const x of openai.files.list()) listed.push(x.id);
      expect(listed).toContain(f.id);
      expect(await (await openai.files.content(f.id)).text()).toBe(text);
      expect(await openai.files.delete(f.id)).toMatchObject({ id: f.id, object: "file", deleted: true });
      expect((await refusal(openai.files.retrieve(f.id))).status).toBe(404);
    });

    test("another purpose, a file that is not JSONL and a missing file are refused with a clear 400", async () => {
      const purpose = await refusal(
        openai.files.create({ file: await toFile(Buffer.from("{}\n"), "x.jsonl"), purpose: "fine-tune" }),
      );
      expect(purpose).toMatchObject({ status: 400, code: "invalid_purpose" });
      expect(purpose.message).toContain('purpose "batch"');
      const notJsonl = await refusal(upload(`${chatLine("a", "chat-model", "x")}\nnot json\n`));
      expect(notJsonl).toMatchObject({ status: 400, code: "invalid_file" });
      expect(notJsonl.message).toContain("line 2");
      const form = new FormData();
      form.set("purpose", "batch");
      const r = await fetch(`${s.url}/endpoint/${s.project}/v1/files`, {
        method: "POST",
        headers: { authorization: `Bearer ${s.live}` },
        body: form,
      });
      expect(r.status).toBe(400);
      expect((await r.json()).error).toMatchObject({ code: "validation_error", field: "file" });
    });
  });

  describe("batches", () => {
    test("on the project base, each line runs on the workload its model names; output and error files in OpenAI's format; a signed batch.completed", async () => {
      const lines = [
        chatLine("by-name", "chat-model", "one two"),
        chatLine("by-alias", "fast", "three"),
        chatLine("by-slug", "chat", "four five six", { stream: true }),
        chatLine("too-long", "chat-model", "seven", { max_tokens: 1000 }),
      ];
      const input = await upload(lines.join("\n"));
      const created = await openai.batches.create({
        input_file_id: input.id,
        endpoint: "/v1/chat/completions",
        completion_window: "24h",
        metadata: { run: "first" },
      });
      expect(created).toMatchObject({
        object: "batch",
        endpoint: "/v1/chat/completions",
        input_file_id: input.id,
        completion_window: "24h",
        metadata: { run: "first" },
        request_counts: { total: 4 },
      });
      expect(created.id).toMatch(/^batch_/);
      expect(["validating", "in_progress"]).toContain(created.status);

      const done = await settled(openai, created.id, "completed", s);
      expect(done.request_counts).toEqual({ total: 4, completed: 3, failed: 1 });
      expect(done.completed_at).toBeNumber();
      expect(done.output_file_id).toMatch(/^file-/);
      expect(done.error_file_id).toMatch(/^file-/);

      const out = await linesOf(openai, done.output_file_id!);
      expect(out.map((l) => l.custom_id).sort()).toEqual(["by-alias", "by-name", "by-slug"]);
      const said = { "by-name": "one two", "by-alias": "three", "by-slug": "four five six" } as Record<string, string>;
      for (const l of out) {
        expect(Object.keys(l)).toEqual(["id", "custom_id", "response", "error"]);
        expect(l.id).toMatch(/^batch_req_/);
        expect(l.error).toBeNull();
        expect(l.response.status_code).toBe(200);
        expect(l.response.request_id).toMatch(/^req_/);
        expect(l.response.body.object).toBe("chat.completion");
        expect(l.response.body.choices[0].message.content).toBe(`You said: ${said[l.custom_id]}`);
      }
      const [err] = await linesOf(openai, done.error_file_id!);
      expect(err).toMatchObject({
        custom_id: "too-long",
        response: { status_code: 400, request_id: expect.stringMatching(/^req_/) },
        error: { code: expect.any(String) },
      });
      expect(err.id).toMatch(/^batch_req_/);
      expect(err.error.message).toContain("maximum context length");
      expect(err.response.body.error.message).toBe(err.error.message);
      const outFile = await openai.files.retrieve(done.output_file_id!);
      expect(outFile).toMatchObject({ purpose: "batch_output", object: "file" });

      const got = await waitFor(
        () => rcv.requests().find((r) => r.path === "/batches" && JSON.parse(r.rawBody).batch_id === created.id),
        { what: "the batch event", timeoutMs: 20_000 },
      );
      expect(got.headers["x-service-event"]).toBe("batch");
      expect(got.headers["x-service-batch-id"]).toBe(created.id);
      new Webhook(hookSecret).verify(got.rawBody, {
        "webhook-id": got.headers["webhook-id"],
        "webhook-timestamp": got.headers["webhook-timestamp"],
        "webhook-signature": got.headers["webhook-signature"],
      });
      await new Stripe("sk_test_unused").webhooks.constructEventAsync(
        got.rawBody,
        got.headers["x-service-signature"],
        hookSecret,
      );
      const event = JSON.parse(got.rawBody);
      expect(event).toMatchObject({
        event: "batch.completed",
        batch_id: created.id,
        data: {
          id: created.id,
          object: "batch",
          status: "completed",
          output_file_id: done.output_file_id,
          request_counts: { total: 4, completed: 3, failed: 1 },
        },
      });
      // The requests themselves sent no job events.
      expect(rcv.requests().filter((r) => r.headers["x-service-event"] === "job")).toEqual([]);
    });

    test("on a workload's base every line goes to that workload (embeddings, no model named); its event goes out with nobody polling", async () => {
      const embed = new OpenAI({ baseURL: `${s.url}/endpoint/${s.project}/embed/v1`, apiKey: s.live, maxRetries: 0 });
      const w = (await (await s.admin(`/admin/projects/${s.project}/workloads`)).json()).find(
        (x: { slug: string }) => x.slug === "embed",
      );
      expect((await s.admin(`/admin/workloads/${w.id}/webhooks`, { body: { url: rcv.url("/embed") } })).status).toBe(
        201,
      );
      const text = ["x", "y z"].map((t, i) => line(`e${i}`, "/v1/embeddings", { input: t })).join("\n");
      const input = await embed.files.create({ file: await toFile(Buffer.from(text), "emb.jsonl"), purpose: "batch" });
      const b = await embed.batches.create({
        input_file_id: input.id,
        endpoint: "/v1/embeddings",
        completion_window: "24h",
      });
      // The server ends the batch on its own: the event arrives before anyone reads the batch again.
      const got = await waitFor(() => rcv.requests().find((r) => r.path === "/embed"), {
        what: "the embed batch's event",
        timeoutMs: 20_000,
      });
      expect(JSON.parse(got.rawBody)).toMatchObject({
        event: "batch.completed",
        batch_id: b.id,
        data: { status: "completed", request_counts: { total: 2, completed: 2, failed: 0 } },
      });
      const done = await settled(embed, b.id, "completed", s);
      expect(done.request_counts).toEqual({ total: 2, completed: 2, failed: 0 });
      expect(done.error_file_id).toBeNull();
      const out = await linesOf(embed, done.output_file_id!);
      expect(out.map((l) => l.custom_id)).toEqual(["e0", "e1"]);
      for (const l of out) expect(l.response.body.data[0].embedding.length).toBeGreaterThan(0);
      // Listed on that base, and on the project base for a project-wide key.
      expect((await embed.batches.list()).data.map((x) => x.id)).toEqual([b.id]);
      expect((await openai.batches.list({ limit: 100 })).data.map((x) => x.id)).toContain(b.id);
    });

    test.each([
      [
        "a duplicate custom_id",
        [chatLine("a", "chat-model", "x"), chatLine("a", "chat-model", "y")],
        "line 2",
        "unique",
      ],
      [
        "a url other than the endpoint",
        [chatLine("a", "chat-model", "x"), line("b", "/v1/embeddings", { input: "x" })],
        "line 2",
        "/v1/chat/completions",
      ],
      [
        "a method other than POST",
        [
          line(
            "a",
            "/v1/chat/completions",
            { model: "chat-model", messages: [{ role: "user", content: "x" }] },
            { method: "GET" },
          ),
        ],
        "line 1",
        "POST",
      ],
      ["a body that is not an object", [line("a", "/v1/chat/completions", [] as never)], "line 1", "body"],
      [
        "a chat body without messages",
        [chatLine("a", "chat-model", "x"), line("b", "/v1/chat/completions", { model: "chat-model" })],
        "line 2",
        "messages",
      ],
      [
        "a model the key may not call",
        [chatLine("a", "chat-model", "x"), chatLine("b", "gpt-4o", "y")],
        "line 2",
        '"chat-model"',
      ],
    ])("%s refuses the batch with 400 naming the line; nothing is stored", async (_name, lines, where, says) => {
      const before = (await openai.batches.list({ limit: 100 })).data.length;
      const input = await upload(lines.join("\n"));
      const e = await refusal(
        openai.batches.create({ input_file_id: input.id, endpoint: "/v1/chat/completions", completion_window: "24h" }),
      );
      expect(e.status).toBe(400);
      expect(e.message).toContain(where);
      expect(e.message).toContain(says);
      expect((await openai.batches.list({ limit: 100 })).data.length).toBe(before);
    });

    test("an unknown endpoint, completion window or input file is a 400", async () => {
      const input = await upload(chatLine("a", "chat-model", "x"));
      const cases = [
        { input_file_id: input.id, endpoint: "/v1/moderations", completion_window: "24h" },
        { input_file_id: input.id, endpoint: "/v1/chat/completions", completion_window: "48h" },
        { input_file_id: "file-missing", endpoint: "/v1/chat/completions", completion_window: "24h" },
      ];
      for (const c of cases) expect((await refusal(openai.batches.create(c as never))).status).toBe(400);
    });

    test("cancel: queued requests end at once, the running one finishes; cancelled with a signed batch.cancelled", async () => {
      const n = 30;
      const input = await upload(
        Array.from({ length: n }, (_, i) => chatLine(`c${i}`, "slow-model", `item ${i}`)).join("\n"),
      );
      const b = await openai.batches.create({
        input_file_id: input.id,
        endpoint: "/v1/chat/completions",
        completion_window: "24h",
      });
      const cancelling = await openai.batches.cancel(b.id);
      expect(["cancelling", "cancelled"]).toContain(cancelling.status);
      const done = await settled(openai, b.id, "cancelled", s);
      expect(done.cancelled_at).toBeNumber();
      expect(done.request_counts!.total).toBe(n);
      expect(done.request_counts!.completed + done.request_counts!.failed).toBe(n);
      expect(done.request_counts!.failed).toBeGreaterThan(n / 2);
      const errs = await linesOf(openai, done.error_file_id!);
      expect(errs.length).toBe(done.request_counts!.failed);
      for (const e of errs) expect(e).toMatchObject({ response: null, error: { code: "batch_cancelled" } });
      const outs = done.output_file_id ? await linesOf(openai, done.output_file_id) : [];
      expect(new Set([...errs, ...outs].map((l) => l.custom_id)).size).toBe(n);
      const got = await waitFor(
        () => rcv.requests().find((r) => r.path === "/slow" && JSON.parse(r.rawBody).batch_id === b.id),
        { what: "the cancel event", timeoutMs: 20_000 },
      );
      expect(JSON.parse(got.rawBody)).toMatchObject({ event: "batch.cancelled", data: { status: "cancelled" } });
      // Cancelling again changes nothing; a batch that completed cannot be cancelled.
      expect((await openai.batches.cancel(done.id)).status).toBe("cancelled");
      const completed = (await openai.batches.list({ limit: 100 })).data.find((x) => x.status === "completed")!;
      expect(await refusal(openai.batches.cancel(completed.id))).toMatchObject({
        status: 409,
        code: "batch_not_cancellable",
      });
    });

    test("list pages newest first with limit and after", async () => {
      const all = (await openai.batches.list({ limit: 100 })).data.map((b) => b.id);
      expect(all.length).toBeGreaterThanOrEqual(3);
      const first = await openai.batches.list({ limit: 2 });
      expect(first.data.map((b) => b.id)).toEqual(all.slice(0, 2));
      expect(first.has_more).toBe(true);
      const next = await openai.batches.list({ limit: 2, after: all[1] });
      expect(next.data.map((b) => b.id)).toEqual(all.slice(2, 4));
      const seen: string[] = [];
      for await (const b of openai.batches.list({ limit: 1 })) seen.push(b.id);
      expect(seen).toEqual(all);
    });

    test("an endpoint-scoped key batches only to its endpoints and sees only its batches", async () => {
      const key = (
        await (
          await s.admin(`/admin/projects/${s.project}/keys`, {
            body: { name: "embed-only", type: "live", scope: "endpoints", endpoints: [`${s.project}/embed`] },
          })
        ).json()
      ).secret as string;
      const scoped = new OpenAI({ baseURL: `${s.url}/endpoint/${s.project}/v1`, apiKey: key, maxRetries: 0 });
      const input = await scoped.files.create({
        file: await toFile(Buffer.from(chatLine("a", "chat-model", "x")), "in.jsonl"),
        purpose: "batch",
      });
      const e = await refusal(
        scoped.batches.create({ input_file_id: input.id, endpoint: "/v1/chat/completions", completion_window: "24h" }),
      );
      expect(e).toMatchObject({ status: 400, code: "model_not_found" });
      expect(e.message).toContain("embed-model");
      const mine = (await scoped.batches.list({ limit: 100 })).data;
      expect(mine.every((b) => b.endpoint === "/v1/embeddings")).toBe(true);
      const chatBatch = (await openai.batches.list({ limit: 100 })).data.find(
        (b) => b.endpoint === "/v1/chat/completions",
      )!;
      expect((await refusal(scoped.batches.retrieve(chatBatch.id))).status).toBe(404);
      expect((await refusal(scoped.files.content(chatBatch.output_file_id ?? chatBatch.error_file_id!))).status).toBe(
        404,
      );
    });
  });

  describe("the completion window", () => {
    test("a batch still running when its window ends is expired: queued requests end as batch_expired, the running one finishes", async () => {
      const n = 30;
      const input = await upload(
        Array.from({ length: n }, (_, i) => chatLine(`x${i}`, "slow-model", `late ${i}`)).join("\n"),
      );
      const b = await openai.batches.create({
        input_file_id: input.id,
        endpoint: "/v1/chat/completions",
        completion_window: "24h",
      });
      expect(b.expires_at! - b.created_at).toBe(24 * 3600);
      await pastWindow(s, b.id);
      const done = await settled(openai, b.id, "expired", s);
      expect(done.expired_at).toBeNumber();
      expect(done.request_counts!.total).toBe(n);
      expect(done.request_counts!.completed + done.request_counts!.failed).toBe(n);
      const errs = await linesOf(openai, done.error_file_id!);
      expect(errs.length).toBeGreaterThan(n / 2);
      for (const e of errs) expect(e).toMatchObject({ response: null, error: { code: "batch_expired" } });
      const outs = done.output_file_id ? await linesOf(openai, done.output_file_id) : [];
      expect(new Set([...errs, ...outs].map((l) => l.custom_id)).size).toBe(n);
    });
  });

  describe("crash safety", () => {
    test("kill -9 mid-batch: after the restart the batch completes with every line answered exactly once", async () => {
      const env = { FAKE_GPUS: "1x NVIDIA GeForce RTX 4090:24564", FAKE_DELAY_MS: "150" };
      let srv = await startServing(env, [], undefined, engine);
      try {
        const w = await srv.createWorkload({
          name: "durable",
          backend: "vllm",
          model_name: "durable-model",
          config: { command: "vllm serve durable-model" },
        });
        const ready = await srv.waitState(w.id);
        expect(
          (
            await srv.admin(`/admin/assignments/${ready.assignments[0].id}`, {
              method: "PATCH",
              body: { concurrency: 1 },
            })
          ).status,
        ).toBe(200);
        const client = (x: Serving) =>
          new OpenAI({ baseURL: `${x.url}/endpoint/${x.project}/v1`, apiKey: x.live, maxRetries: 0 });
        const n = 16;
        const input = await client(srv).files.create({
          file: await toFile(
            Buffer.from(
              Array.from({ length: n }, (_, i) => chatLine(`d${i}`, "durable-model", `line ${i}`)).join("\n"),
            ),
            "d.jsonl",
          ),
          purpose: "batch",
        });
        const b = await client(srv).batches.create({
          input_file_id: input.id,
          endpoint: "/v1/chat/completions",
          completion_window: "24h",
        });
        await waitFor(
          async () => {
            const x = await client(srv).batches.retrieve(b.id);
            return x.request_counts!.completed >= 3 || undefined;
          },
          { what: "some lines done", timeoutMs: 30_000, intervalMs: 50 },
        );
        const mid = await client(srv).batches.retrieve(b.id);
        expect(mid.status).toBe("in_progress");
        expect(mid.request_counts!.completed).toBeLessThan(n);
        await srv.kill9();
        srv = await startServing({ ...env, ...srv.storeEnv }, [], srv.dataDir, engine);
        const done = await settled(client(srv), b.id, "completed", srv, 90_000);
        expect(done.request_counts).toEqual({ total: n, completed: n, failed: 0 });
        const out = await linesOf(client(srv), done.output_file_id!);
        expect(out.map((l) => l.custom_id).sort()).toEqual(Array.from({ length: n }, (_, i) => `d${i}`).sort());
        expect(new Set(out.map((l) => l.id)).size).toBe(n);
        for (const l of out)
          expect(l.response.body.choices[0].message.content).toBe(`You said: line ${l.custom_id.slice(1)}`);
      } finally {
        await srv.stop().catch(() => 0);
      }
    });
  });
}
