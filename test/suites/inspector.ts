import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { seedProject, startTestServer, type TestServer } from "../helpers/server";
import type { Engine } from "../helpers/postgres";
import type { RequestRecord } from "../../src/inspector/record";
import { pruneRequests } from "../../src/inspector/log";

/**
 * The request inspector's API through a real in-process server: records handed to the server's own
 * sink (`Running.requests`, what the data plane calls `add` on) are written by its flush and listed
 * newest first with each filter, paged by `next_before`; a captured record's bodies come back as
 * text or base64; `capture_until` is checked, shown and audited; the retention sweep's function
 * removes rows past the job retention and beyond the per-workload cap. Until the data plane fills
 * records (issue 26's tracing part), records here are built by the test, not by a real chat.
 */
export function inspectorSuite(engine: Engine): void {
  let s: TestServer;
  let workloadId = "";
  let projectId = "";
  let keys: { id: string; name: string; prefix: string }[] = [];
  const base = Date.now() - 60_000;

  /** A finished request as the data plane would record it. */
  const record = (n: number, over: Partial<RequestRecord> = {}): RequestRecord => ({
    id: `req_${String(n).padStart(3, "0")}`,
    requestId: `req_${String(n).padStart(3, "0")}`,
    at: base + n * 10,
    workloadId,
    projectId,
    keyId: keys[n % 2].id,
    kind: "request",
    route: "POST /v1/chat/completions",
    model: n % 3 === 0 ? "llama-3-8b" : "qwen-2-7b",
    status: n % 5 === 0 ? 429 : 200,
    errorCode: n % 5 === 0 ? "rate_limited" : null,
    errorMessage: n % 5 === 0 ? "this key may make 6 requests per minute" : null,
    source: null,
    fellBackFrom: [],
    tokensIn: 10 + n,
    tokensOut: 20 + n,
    queueMs: 1,
    ttftMs: 30,
    totalMs: 100 + n,
    assignmentId: "asg_1",
    workerId: null,
    hostId: null,
    traceId: `4bf92f3577b34da6a3ce929d0e0e${String(n).padStart(4, "0")}`,
    spans: [
      { name: "auth", start: 0, end: 2 },
      { name: "queue", start: 2, end: 3 },
      { name: "upstream", start: 3, end: 100 + n, attrs: { "http.status": 200 } },
    ],
    ...over,
  });
  const list = async (query = "") => {
    const r = await s.admin(`/admin/workloads/${workloadId}/requests${query}`);
    expect(r.status).toBe(200);
    return (await r.json()) as {
      requests: {
        id: string;
        status: number;
        key: { id: string; name: string; prefix: string } | null;
        model: string;
        captured: boolean;
      }[];
      next_before: string | null;
    };
  };

  beforeAll(async () => {
    s = await startTestServer({}, { engine });
    const { project } = await seedProject(s, "Inspected", "inspected");
    projectId = project.id;
    keys = await (await s.admin("/admin/projects/inspected/keys")).json();
    const w = await (
      await s.admin("/admin/projects/inspected/workloads", {
        body: { name: "Chat", backend: "vllm", model_name: "m", config: { command: "vllm serve m" } },
      })
    ).json();
    workloadId = w.id;
    for (let n = 1; n <= 30; n++) s.requests.add(record(n));
    await s.requests.flush();
  }, 60_000);
  afterAll(() => s?.close());

  describe("the list", () => {
    test("newest first with each row's key, figures and replica; limited pages follow next_before to the end", async () => {
      const first = await list("?limit=12");
      expect(first.requests.map((r) => r.id)).toEqual(
        Array.from({ length: 12 }, (_, i) => `req_${String(30 - i).padStart(3, "0")}`),
      );
      expect(first.requests[0]).toMatchObject({
        status: 429,
        error_code: "rate_limited",
        model: "llama-3-8b",
        tokens_in: 40,
        tokens_out: 50,
        queue_ms: 1,
        ttft_ms: 30,
        total_ms: 130,
        route: "POST /v1/chat/completions",
        replica: { assignment_id: "asg_1" },
        captured: false,
      });
      expect(first.requests[0].key).toEqual({ id: keys[0].id, name: keys[0].name, prefix: keys[0].prefix });
      const seen = [...first.requests.map((r) => r.id)];
      let next = first.next_before;
      while (next) {
        const page = await list(`?limit=12&before=${encodeURIComponent(next)}`);
        seen.push(...page.requests.map((r) => r.id));
        next = page.next_before;
      }
      expect(seen).toHaveLength(30);
      expect(new Set(seen).size).toBe(30);
    });

    test("filters: ok, error, a status, an error code, a key, a request id or model, since", async () => {
      expect((await list("?status=error")).requests.map((r) => r.id)).toEqual([
        "req_030",
        "req_025",
        "req_020",
        "req_015",
        "req_010",
        "req_005",
      ]);
      expect((await list("?status=ok")).requests).toHaveLength(24);
      expect((await list("?status=429")).requests).toHaveLength(6);
      expect((await list("?status=rate_limited")).requests).toHaveLength(6);
      expect((await list(`?key=${keys[1].id}`)).requests.every((r) => r.key?.id === keys[1].id)).toBe(true);
      expect((await list(`?key=${keys[1].id}`)).requests).toHaveLength(15);
      expect((await list("?q=req_01")).requests.map((r) => r.id)).toEqual([
        "req_019",
        "req_018",
        "req_017",
        "req_016",
        "req_015",
        "req_014",
        "req_013",
        "req_012",
        "req_011",
        "req_010",
      ]);
      expect((await list("?q=LLAMA")).requests).toHaveLength(10);
      expect((await list("?q=100%25")).requests).toHaveLength(0);
      expect((await list(`?since=${new Date(base + 255).toISOString()}`)).requests.map((r) => r.id)).toEqual([
        "req_030",
        "req_029",
        "req_028",
        "req_027",
        "req_026",
      ]);
    });

    test("bad filters answer 400 naming the field; an unknown workload 404", async () => {
      for (const [query, field] of [
        ["?limit=0", "limit"],
        ["?limit=x", "limit"],
        ["?since=yesterday", "since"],
        ["?before=nope", "before"],
        ["?status=a%20b", "status"],
      ]) {
        const r = await s.admin(`/admin/workloads/${workloadId}/requests${query}`);
        expect(r.status).toBe(400);
        expect((await r.json()).error).toMatchObject({ code: "validation_error", field });
      }
      const r = await s.admin("/admin/workloads/wl_nope/requests");
      expect(r.status).toBe(404);
      expect((await r.json()).error.code).toBe("not_found");
    });
  });

  describe("one request", () => {
    test("its record and timeline; an unknown id is 404", async () => {
      const r = await (await s.admin("/admin/requests/req_007")).json();
      expect(r).toMatchObject({
        id: "req_007",
        workload_id: workloadId,
        project_id: projectId,
        at: new Date(base + 70).toISOString(),
        captured: false,
      });
      expect(r.spans.map((x: { name: string }) => x.name)).toEqual(["auth", "queue", "upstream"]);
      expect(r.spans[2]).toEqual({ name: "upstream", start: 3, end: 107, attrs: { "http.status": 200 } });
      expect((await s.admin("/admin/requests/req_007/bodies")).status).toBe(404);
      const gone = await s.admin("/admin/requests/nope");
      expect(gone.status).toBe(404);
      expect((await gone.json()).error.code).toBe("not_found");
    });

    test("captured bodies: JSON and SSE as text, binary as base64", async () => {
      const enc = new TextEncoder();
      const sse = 'data: {"choices":[{"delta":{"content":"Hé"}}]}\n\ndata: [DONE]\n\n';
      s.requests.add(
        record(40, {
          bodies: {
            requestType: "application/json",
            request: enc.encode('{"messages":[{"role":"user","content":"hi"}]}'),
            responseType: "text/event-stream",
            response: enc.encode(sse),
            truncated: false,
          },
        }),
      );
      s.requests.add(
        record(41, {
          bodies: {
            requestType: "audio/wav",
            request: new Uint8Array([0, 255, 1, 2]),
            responseType: "application/json",
            response: enc.encode('{"text":"ok"}'),
            truncated: true,
          },
        }),
      );
      await s.requests.flush();
      expect((await list("?limit=2")).requests.map((r) => [r.id, r.captured])).toEqual([
        ["req_041", true],
        ["req_040", true],
      ]);
      expect(await (await s.admin("/admin/requests/req_040/bodies")).json()).toEqual({
        request: {
          type: "application/json",
          bytes: 45,
          encoding: "text",
          data: '{"messages":[{"role":"user","content":"hi"}]}',
        },
        response: { type: "text/event-stream", bytes: enc.encode(sse).byteLength, encoding: "text", data: sse },
        truncated: false,
      });
      const bin = await (await s.admin("/admin/requests/req_041/bodies")).json();
      expect(bin.request).toEqual({ type: "audio/wav", bytes: 4, encoding: "base64", data: "AP8BAg==" });
      expect(bin.truncated).toBe(true);
    });

    test("a repeated request id is kept once and does not lose the rest of its batch", async () => {
      s.requests.add(record(7, { model: "again" }));
      s.requests.add(record(42));
      await s.requests.flush();
      expect((await (await s.admin("/admin/requests/req_007")).json()).model).toBe("qwen-2-7b");
      expect((await s.admin("/admin/requests/req_042")).status).toBe(200);
    });
  });

  describe("capture_until", () => {
    const patch = (body: unknown) => s.admin(`/admin/workloads/${workloadId}`, { method: "PATCH", body });

    test("is set ahead up to 7 days, shown on the workload, audited, and stopped with null", async () => {
      expect((await (await s.admin(`/admin/workloads/${workloadId}`)).json()).capture_until).toBeNull();
      const until = new Date(Date.now() + 3_600_000).toISOString();
      const set = await patch({ capture_until: until });
      expect(set.status).toBe(200);
      expect((await set.json()).capture_until).toBe(until);
      expect((await (await s.admin(`/admin/workloads/${workloadId}`)).json()).capture_until).toBe(until);
      expect((await (await patch({ capture_until: null })).json()).capture_until).toBeNull();
      const entries = (await (await s.admin("/admin/audit?action=workload.capture")).json()).entries;
      expect(entries.map((e: { diff: unknown }) => e.diff)).toEqual([
        { capture_until: { from: until, to: null } },
        { capture_until: { from: null, to: until } },
      ]);
      expect(entries[0].actor.type).toBe("admin");
    });

    test("a past time, one more than 7 days ahead, or not a time is refused at the field; nothing changes", async () => {
      for (const value of [
        new Date(Date.now() - 60_000).toISOString(),
        new Date(Date.now() + 8 * 86_400_000).toISOString(),
        "tomorrow",
        5,
      ]) {
        const r = await patch({ capture_until: value, description: "should not land" });
        expect(r.status).toBe(400);
        expect((await r.json()).error).toMatchObject({ code: "validation_error", field: "capture_until" });
      }
      const w = await (await s.admin(`/admin/workloads/${workloadId}`)).json();
      expect(w.capture_until).toBeNull();
      expect(w.description).toBe("");
    });

    test("a tenant's control-plane key can neither set nor see it", async () => {
      const sdk = (
        await (await s.admin("/admin/projects/inspected/keys", { body: { name: "tenant", type: "sdk" } })).json()
      ).secret;
      const r = await s.call(`/api/workloads/${workloadId}`, sdk, {
        method: "PATCH",
        body: { capture_until: new Date(Date.now() + 60_000).toISOString() },
      });
      expect(r.status).toBe(400);
      expect((await r.json()).error.field).toBe("capture_until");
      expect(await (await s.call(`/api/workloads/${workloadId}`, sdk)).json()).not.toHaveProperty("capture_until");
    });
  });

  describe("retention", () => {
    test("rows and bodies older than the job retention go; the newest are kept per workload up to the cap", async () => {
      const retentionMs = s.config.jobRetentionHours * 3_600_000;
      const old = Date.now() - retentionMs - 60_000;
      s.requests.add(
        record(90, {
          at: old,
          bodies: {
            requestType: "application/json",
            request: new TextEncoder().encode("{}"),
            responseType: null,
            response: null,
            truncated: false,
          },
        }),
      );
      s.requests.add(record(91, { at: old - 365 * 86_400_000 }));
      await s.requests.flush();
      expect((await s.admin("/admin/requests/req_090/bodies")).status).toBe(200);
      await pruneRequests(s.store.db, retentionMs);
      for (const id of ["req_090", "req_091"]) expect((await s.admin(`/admin/requests/${id}`)).status).toBe(404);
      expect((await s.admin("/admin/requests/req_090/bodies")).status).toBe(404);
      expect((await s.admin("/admin/requests/req_040/bodies")).status).toBe(200);
      const before = (await list("?limit=200")).requests.length;
      await pruneRequests(s.store.db, retentionMs, 5);
      expect((await list("?limit=200")).requests.map((r) => r.id)).toEqual([
        "req_042",
        "req_041",
        "req_040",
        "req_030",
        "req_029",
      ]);
      expect(before).toBe(33);
      expect((await s.admin("/admin/requests/req_040/bodies")).status).toBe(200);
    });
  });
}
