import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import OpenAI from "openai";
import { join } from "node:path";
import { cleanup, repoRoot } from "./helpers/proc";
import { servingPool, type Serving } from "./helpers/serving";
import { startCollector, type Collector, type ReceivedSpan } from "./fixtures/otlp-collector";

/**
 * OpenTelemetry traces as an operator sees them in Jaeger or Tempo: inferd started with the
 * standard OTEL_* variables sends each data-plane request and each job as one trace to a collector
 * (a real OTLP/HTTP receiver that decodes protobuf and JSON); a client's `traceparent` makes the
 * request (or the job it submits) part of the client's trace, and the runtime is told the trace too. Unset, nothing is sent
 * and the SDK is never loaded.
 */
const pool = servingPool();
let proto: Collector;
let json: Collector;
let traced: Serving;
let jsonServer: Serving;
let off: Serving;
const wl: Record<string, { id: string; slug: string; assignment: string }> = {};

async function withWorkload(s: Serving, name: string) {
  const w = await s.createWorkload({
    name,
    backend: "vllm",
    model_name: `org/${name}`,
    config: { command: `vllm serve org/${name}` },
  });
  const ready = await s.waitState(w.id);
  wl[name] = { id: w.id, slug: w.slug, assignment: ready.assignments[0].id };
}

beforeAll(async () => {
  proto = startCollector();
  json = startCollector();
  const fast = { OTEL_BSP_SCHEDULE_DELAY: "100" };
  [traced, jsonServer, off] = await Promise.all([
    pool.serve({ ...fast, OTEL_EXPORTER_OTLP_ENDPOINT: proto.url, OTEL_SERVICE_NAME: "inferd-test" }),
    pool.serve({ ...fast, OTEL_EXPORTER_OTLP_ENDPOINT: json.url, OTEL_EXPORTER_OTLP_PROTOCOL: "http/json" }),
    pool.serve({ OTEL_SERVICE_NAME: "inferd-off" }),
  ]);
  await Promise.all([withWorkload(traced, "traced"), withWorkload(jsonServer, "json"), withWorkload(off, "off")]);
});
afterAll(async () => {
  await pool.stopAll();
  proto?.stop();
  json?.stop();
  await cleanup();
});

const client = (s: Serving, w: string, headers: Record<string, string> = {}) =>
  new OpenAI({ baseURL: `${s.url}/endpoint/${s.project}/${w}/v1`, apiKey: s.live, defaultHeaders: headers });

async function streamChat(s: Serving, w: string, headers: Record<string, string> = {}): Promise<string> {
  const stream = await client(s, w, headers).chat.completions.create({
    model: `org/${w}`,
    stream: true,
    messages: [{ role: "user", content: "trace this answer" }],
  });
  let text = "";
  for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? "";
  return text;
}

/** A whole trace once its root and `names` have arrived. */
function traceOf(c: Collector, pick: (root: ReceivedSpan) => boolean, names: string[]) {
  return c.waitFor("the trace at the collector", (spans) => {
    const root = spans.find((s) => (s.kind === 2 || s.kind === 5) && pick(s));
    if (!root) return undefined;
    const children = spans.filter((s) => s.traceId === root.traceId && s.parentSpanId === root.spanId);
    return names.every((n) => children.some((c) => c.name === n))
      ? { root, children, byName: (n: string) => children.find((c) => c.name === n)! }
      : undefined;
  });
}

/** The `traceparent` the fake runtime got with the request whose x-request-id is `rid`. */
const runtimeTraceparent = (s: Serving, rid: string) =>
  s.events((e) => e.event === "request" && e.request_id === rid)[0]?.traceparent as string | undefined;

const STREAM_SPANS = ["auth", "queue", "dispatch", "upstream", "ttft", "stream", "meter"];

describe("tracing on (http/protobuf)", () => {
  test("a streamed chat with the client's traceparent arrives as one trace under the client's span; the runtime gets that trace", async () => {
    const traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
    const parent = "00f067aa0ba902b7";
    const text = await streamChat(traced, "traced", {
      traceparent: `00-${traceId}-${parent}-01`,
      tracestate: "vendor=abc",
      "x-request-id": "trace-stream-1",
    });
    expect(text).toBe("You said: trace this answer");
    const t = await traceOf(proto, (r) => r.traceId === traceId, STREAM_SPANS);
    const { root } = t;
    expect(root.parentSpanId).toBe(parent);
    expect(root.name).toBe("POST /v1/chat/completions");
    expect(root.kind).toBe(2);
    expect(root.service).toBe("inferd-test");
    expect(root.attributes).toMatchObject({
      "gen_ai.request.model": "org/traced",
      "gen_ai.operation.name": "chat",
      "http.response.status_code": 200,
      "inferd.workload": wl.traced.id,
      "inferd.replica": wl.traced.assignment,
      "inferd.request_id": "trace-stream-1",
    });
    expect(root.attributes["gen_ai.usage.input_tokens"]).toBeGreaterThan(0);
    expect(root.attributes["gen_ai.usage.output_tokens"]).toBeGreaterThan(0);
    expect(String(root.attributes["inferd.key"])).toMatch(/^key_/);
    // The timeline's spans, in order of the request's life, inside the root's time.
    const dispatch = t.byName("dispatch");
    expect(dispatch.kind).toBe(3);
    expect(dispatch.attributes).toMatchObject({ replica: wl.traced.assignment, routing: "least_loaded" });
    expect(String(dispatch.attributes.worker)).toMatch(/^wk_/);
    expect(String(dispatch.attributes.host)).toMatch(/^hst_/);
    expect(t.byName("queue").attributes).toMatchObject({ priority: "interactive", position: 0 });
    for (const c of t.children) {
      expect(c.start).toBeGreaterThanOrEqual(root.start - 0.01);
      expect(c.end).toBeLessThanOrEqual(root.end + 0.01);
    }
    expect(t.byName("auth").end).toBeLessThanOrEqual(t.byName("queue").end + 0.01);
    expect(t.byName("ttft").end).toBeLessThanOrEqual(t.byName("stream").start + 0.01);
    // The runtime was told the trace, with the dispatch span as its parent (its own spans hang there).
    expect(runtimeTraceparent(traced, "trace-stream-1")).toBe(`00-${traceId}-${dispatch.spanId}-01`);
  });

  test("a request without traceparent starts its own trace; a malformed one is ignored, never an error", async () => {
    await streamChat(traced, "traced", { "x-request-id": "trace-new-1" });
    const fresh = await traceOf(proto, (r) => r.attributes["inferd.request_id"] === "trace-new-1", STREAM_SPANS);
    expect(fresh.root.parentSpanId).toBe("");
    expect(fresh.root.traceId).toMatch(/^[0-9a-f]{32}$/);
    expect(runtimeTraceparent(traced, "trace-new-1")).toBe(
      `00-${fresh.root.traceId}-${fresh.byName("dispatch").spanId}-01`,
    );

    const bad = "00-00000000000000000000000000000000-00f067aa0ba902b7-01";
    const r = await traced.data("traced", "/v1/chat/completions", {
      body: { model: "org/traced", messages: [{ role: "user", content: "hi" }] },
      headers: { traceparent: bad, "x-request-id": "trace-bad-1" },
    });
    expect(r.status).toBe(200);
    const t = await traceOf(proto, (s) => s.attributes["inferd.request_id"] === "trace-bad-1", [
      "auth",
      "queue",
      "dispatch",
      "upstream",
      "meter",
    ]);
    expect(t.root.parentSpanId).toBe("");
    expect(t.root.traceId).not.toBe("0".repeat(32));
  });

  test("a job run is a trace of its own", async () => {
    const r = await traced.data("traced", "/jobs", {
      body: { kind: "chat", body: { messages: [{ role: "user", content: "a traced job" }] } },
    });
    expect(r.status).toBe(202);
    const { job_id } = await r.json();
    const t = await traceOf(proto, (s) => s.attributes["inferd.request_id"] === job_id, [
      "queue",
      "dispatch",
      "upstream",
      "meter",
    ]);
    expect(t.root.name).toBe("job chat");
    expect(t.root.kind).toBe(5);
    expect(t.root.attributes).toMatchObject({
      "inferd.kind": "job",
      "inferd.job.kind": "chat",
      "inferd.workload": wl.traced.id,
      "inferd.replica": wl.traced.assignment,
    });
    expect(t.root.attributes["gen_ai.usage.output_tokens"]).toBeGreaterThan(0);
    expect(t.children.filter((c) => c.name === "queue").some((q) => q.attributes.stored === true)).toBe(true);
  });

  test("a job submitted with a traceparent runs in the submitter's trace, under its span; the runtime is told that trace", async () => {
    const traceId = "5ce0e9a56015fec5aadfa328ae398115";
    const parent = "ab3b2e4a51fcd3f1";
    const r = await traced.data("traced", "/jobs", {
      body: { kind: "chat", body: { messages: [{ role: "user", content: "a job in my trace" }] } },
      headers: { traceparent: `00-${traceId}-${parent}-01`, "x-request-id": "trace-job-1" },
    });
    expect(r.status).toBe(202);
    const { job_id } = await r.json();
    const t = await traceOf(proto, (s) => s.traceId === traceId, ["queue", "dispatch", "upstream", "meter"]);
    expect(t.root.parentSpanId).toBe(parent);
    expect(t.root.name).toBe("job chat");
    expect(t.root.attributes["inferd.request_id"]).toBe(job_id);
    expect(runtimeTraceparent(traced, "trace-job-1")).toBe(`00-${traceId}-${t.byName("dispatch").spanId}-01`);
  });
});

describe("tracing on (http/json)", () => {
  test("traces go out as OTLP/JSON when the protocol says so", async () => {
    const r = await jsonServer.data("json", "/v1/chat/completions", {
      body: { model: "org/json", messages: [{ role: "user", content: "json please" }] },
      headers: { "x-request-id": "trace-json-1" },
    });
    expect(r.status).toBe(200);
    const t = await traceOf(json, (s) => s.attributes["inferd.request_id"] === "trace-json-1", [
      "auth",
      "queue",
      "dispatch",
      "upstream",
      "meter",
    ]);
    // A whole (not streamed) answer has no first token: no ttft span, as the inspector shows no TTFT.
    expect(t.children.some((c) => c.name === "ttft")).toBe(false);
    expect(t.root.service).toBe("inferd");
    expect(t.root.attributes["http.response.status_code"]).toBe(200);
    expect(json.contentTypes.every((c) => c.includes("application/json"))).toBe(true);
  });
});

describe("tracing off", () => {
  test("the client's traceparent still reaches the runtime, and nothing is exported", async () => {
    const traceId = "0af7651916cd43dd8448eb211c80319c";
    await streamChat(off, "off", { traceparent: `00-${traceId}-b7ad6b7169203331-01`, "x-request-id": "trace-off-1" });
    expect(runtimeTraceparent(off, "trace-off-1")).toMatch(new RegExp(`^00-${traceId}-[0-9a-f]{16}-01$`));
    await streamChat(off, "off", { "x-request-id": "trace-off-2" });
    expect(runtimeTraceparent(off, "trace-off-2")).toBeUndefined();
    expect([...proto.spans, ...json.spans].some((s) => s.traceId === traceId || s.service === "inferd-off")).toBe(
      false,
    );
  });

  test("without an OTLP endpoint the server's modules never load the OpenTelemetry SDK", async () => {
    // A fresh process (this one may have loaded it for other tests): the whole server graph, then
    // the exporter asked for with and without an endpoint.
    const script = `
      await import(${JSON.stringify(join(repoRoot, "src/server.ts"))});
      const { loadTraceExporter } = await import(${JSON.stringify(join(repoRoot, "src/tracing/tracing.ts"))});
      const loaded = () => Object.keys(require.cache).some((k) => k.includes("@opentelemetry/"));
      const off = await loadTraceExporter({ OTEL_SERVICE_NAME: "x" }, "t");
      const before = loaded();
      const on = await loadTraceExporter({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:9" }, "t");
      console.log(JSON.stringify({ off: off === undefined, before, after: loaded() }));
      await on.shutdown();
    `;
    const p = Bun.spawn([process.execPath, "-e", script], { cwd: repoRoot, stdout: "pipe", stderr: "pipe" });
    const [out, err] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
    expect(err).toBe("");
    expect(JSON.parse(out.trim().split("\n").pop()!)).toEqual({ off: true, before: false, after: true });
  });
});
