import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import OpenAI, { toFile } from "openai";
import { readdirSync } from "node:fs";
import { cleanup, tempDir } from "./helpers/proc";
import { startServing, type Serving } from "./helpers/serving";
import { ModelFieldScanner, uploadModel } from "../src/multipart";

/**
 * Uploads' `model` field wherever it stands: openai-node keeps the caller's key order, so
 * `{ file, model }` sends a 3 MB file before `model`. The field still reaches the runtime as the
 * served name (the fake vLLM echoes the fields it parsed), on a workload's base and on the
 * project's base (routed by it to the right one of two audio2text workloads, spooled meanwhile to a
 * temp file that is gone afterwards). The streaming scanner's unit tests: every split, the end of a
 * big body, no field, another name, and what it holds between chunks.
 */
let s: Serving;
let a: { id: string; slug: string };
let b: { id: string; slug: string };
/** The server's temp dir: the spooled uploads go there and must not stay. */
const tmp = tempDir("uploads-tmp");
const LIMIT = 8 << 20;
const audio = new Uint8Array(3_000_000).map((_, i) => (i * 7) % 256);

beforeAll(async () => {
  s = await startServing({ TMPDIR: tmp, INFERD_MAX_DATA_BODY_BYTES: String(LIMIT) });
  a = await s.createWorkload({
    name: "whisper",
    backend: "vllm",
    model_name: "openai/whisper-large-v3",
    task_type: "audio2text",
    aliases: ["stt"],
    config: { command: "vllm serve openai/whisper-large-v3" },
  });
  b = await s.createWorkload({
    name: "distil",
    backend: "vllm",
    model_name: "distil/whisper-small",
    task_type: "audio2text",
    aliases: ["stt-fast"],
    config: { command: "vllm serve distil/whisper-small" },
  });
  await Promise.all([s.waitState(a.id), s.waitState(b.id)]);
});
afterAll(async () => {
  await s.stop();
  await cleanup();
});

/** What the fake runtime echoes of an upload. */
type Echo = { model: string; bytes: number; fields: Record<string, string>; files: { field: string; size: number }[] };

/** An OpenAI client on `baseURL` that notes the field order of the forms it sends. */
function client(baseURL: string) {
  const orders: string[][] = [];
  const c = new OpenAI({
    baseURL,
    apiKey: s.live,
    maxRetries: 0,
    fetch: (url, init) => {
      if (init?.body instanceof FormData) orders.push([...init.body.keys()]);
      return fetch(url, init);
    },
  });
  return { c, orders };
}

const transcribe = async (c: OpenAI, model: string) =>
  (await c.audio.transcriptions.create({
    file: await toFile(audio, "audio.wav", { type: "audio/wav" }),
    model,
  })) as unknown as Echo;

describe("an upload with its file first", () => {
  test('per-workload base: a 3 MB transcription with model "default" reaches the runtime with the served name', async () => {
    const { c, orders } = client(`${s.url}/endpoint/${s.project}/${a.slug}/v1`);
    const r = await transcribe(c, "default");
    expect(orders).toEqual([["file", "model"]]);
    expect(r.fields.model).toBe("openai/whisper-large-v3");
    expect(r.files).toEqual([expect.objectContaining({ field: "file", size: audio.byteLength })]);
    expect((await transcribe(c, a.slug)).fields.model).toBe("openai/whisper-large-v3");
  });

  test("project base: routed by model name or alias to the right workload; the spool leaves nothing behind", async () => {
    const { c } = client(`${s.url}/endpoint/${s.project}/v1`);
    for (const [model, served] of [
      ["openai/whisper-large-v3", "openai/whisper-large-v3"],
      ["stt", "openai/whisper-large-v3"],
      ["stt-fast", "distil/whisper-small"],
      [b.slug, "distil/whisper-small"],
    ]) {
      const r = await transcribe(c, model);
      expect(r.model).toBe(served);
      expect(r.fields.model).toBe(served);
      expect(r.files[0].size).toBe(audio.byteLength);
    }
    const unknown = await transcribe(c, "whisper-1").catch((e) => e);
    expect(unknown).toBeInstanceOf(OpenAI.NotFoundError);
    expect(unknown.error.code).toBe("model_not_found");
    expect(unknown.message).toContain("stt-fast");
    expect(readdirSync(tmp).filter((f) => f.startsWith("inferd-upload-"))).toEqual([]);
  });

  test("project base: past the body limit, whether the model field was reached or not, is 413", async () => {
    const big = new Uint8Array(LIMIT + 1000);
    for (const fields of [
      ["file", "model"],
      ["model", "file"],
    ]) {
      const form = new FormData();
      for (const f of fields)
        f === "file" ? form.append("file", new Blob([big]), "big.wav") : form.append("model", "stt");
      const r = await fetch(`${s.url}/endpoint/${s.project}/v1/audio/transcriptions`, {
        method: "POST",
        headers: { authorization: `Bearer ${s.live}` },
        body: form,
      });
      expect(r.status).toBe(413);
      expect((await r.json()).error.code).toBe("payload_too_large");
    }
    expect(readdirSync(tmp).filter((f) => f.startsWith("inferd-upload-"))).toEqual([]);
  });
});

const B = "----formdata-b0undary";
const enc = (t: string) => Buffer.from(t, "latin1");
/** A multipart body of `fields` (a Uint8Array value is a file part). */
function form(fields: [string, string | Uint8Array][]): Buffer {
  const parts = fields.map(([k, v]) =>
    Buffer.concat([
      enc(
        `--${B}\r\nContent-Disposition: form-data; name="${k}"${typeof v === "string" ? "" : '; filename="a.wav"\r\nContent-Type: audio/wav'}\r\n\r\n`,
      ),
      Buffer.from(v),
      enc("\r\n"),
    ]),
  );
  return Buffer.concat([...parts, enc(`--${B}--\r\n`)]);
}
/** The body fed to a scanner in `chunks`, rewritten; and the most it held between chunks. */
function scan(body: Uint8Array, cuts: number[]): { out: Buffer; model?: string; maxHeld: number } {
  const scanner = new ModelFieldScanner(B, (v) => (v === "default" || v === "stt" ? "Served/Name" : undefined));
  const out: Uint8Array[] = [];
  let maxHeld = 0;
  let at = 0;
  for (const cut of [...cuts, body.byteLength]) {
    out.push(...scanner.push(body.subarray(at, cut)));
    maxHeld = Math.max(maxHeld, scanner.held);
    at = cut;
  }
  out.push(...scanner.end());
  return { out: Buffer.concat(out), model: scanner.model, maxHeld };
}

describe("the streaming model-field scanner", () => {
  const file = new Uint8Array(3000).map((_, i) => i % 251);

  test("the model field split across two chunks at every offset, before or after a file", () => {
    for (const order of [
      [
        ["model", "default"],
        ["file", file],
      ],
      [
        ["file", file],
        ["language", "en"],
        ["model", "default"],
      ],
    ] as [string, string | Uint8Array][][]) {
      const body = form(order);
      const want = form(order.map(([k, v]) => [k, k === "model" ? "Served/Name" : v]));
      for (let cut = 0; cut <= body.byteLength; cut++) expect(scan(body, [cut]).out.equals(want)).toBe(true);
      expect(
        scan(
          body,
          Array.from({ length: body.byteLength }, (_, i) => i),
        ).out.equals(want),
      ).toBe(true);
    }
  });

  test("at the end of a big body, in 64 KiB chunks: found and set, holding a few KiB at most", () => {
    const big = new Uint8Array(5_000_000).map((_, i) => (i * 13) % 256);
    const body = form([
      ["file", big],
      ["model", "stt"],
    ]);
    const cuts = Array.from({ length: Math.floor(body.byteLength / 65_536) }, (_, i) => (i + 1) * 65_536);
    const r = scan(body, cuts);
    expect(r.model).toBe("stt");
    expect(
      r.out.equals(
        form([
          ["file", big],
          ["model", "Served/Name"],
        ]),
      ),
    ).toBe(true);
    expect(r.maxHeld).toBeLessThan(4096);
  });

  test("no model field, another name, or a file part named model: the body passes unchanged", () => {
    for (const body of [
      form([
        ["file", file],
        ["language", "en"],
      ]),
      form([
        ["file", file],
        ["model", "whisper-1"],
      ]),
      form([
        ["model", file],
        ["prompt", "default"],
      ]),
    ]) {
      for (const cuts of [[], [1, 2, 3], [100, 2000, 3100]]) expect(scan(body, cuts).out.equals(body)).toBe(true);
    }
    expect(
      scan(
        form([
          ["file", file],
          ["model", "whisper-1"],
        ]),
        [50],
      ).model,
    ).toBe("whisper-1");
    expect(scan(form([["model", file]]), []).model).toBeUndefined();
  });

  test("uploadModel finds a model after a 3 MB file and replays the body byte for byte", async () => {
    const body = form([
      ["file", audio],
      ["model", "stt"],
    ]);
    const chunks = new ReadableStream<Uint8Array>({
      start(c) {
        for (let i = 0; i < body.byteLength; i += 50_000) c.enqueue(body.subarray(i, i + 50_000));
        c.close();
      },
    });
    const request = new Request("http://x/up", {
      method: "POST",
      headers: { "content-type": `multipart/form-data; boundary=${B}` },
      body: chunks,
      duplex: "half",
    } as RequestInit);
    const got = await uploadModel(request, LIMIT);
    expect(got.model).toBe("stt");
    expect(got.request.headers.get("content-type")).toContain(B);
    expect(Buffer.from(await got.request.arrayBuffer()).equals(body)).toBe(true);
  });
});
