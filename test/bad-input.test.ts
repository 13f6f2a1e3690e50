import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { seedProject, startTestServer, type TestServer } from "./helpers/server";

let s: TestServer;
let ctx: Awaited<ReturnType<typeof seedProject>>;
beforeAll(async () => {
  s = await startTestServer({ INFERD_MAX_BODY_BYTES: "2048" });
  ctx = await seedProject(s, "Input", "input");
});
afterAll(() => s.close());

const expectShape = async (r: Response, status: number, code?: string) => {
  expect(r.status).toBe(status);
  const body = await r.json();
  expect(typeof body.error.code).toBe("string");
  expect(typeof body.error.message).toBe("string");
  if (code) expect(body.error.code).toBe(code);
  return body;
};

describe("bad input gets a clear 4xx in the contract's shape", () => {
  const post = (raw: BodyInit, headers: Record<string, string>) =>
    s.call("/api/projects/input/workloads", ctx.sdk, { method: "POST", raw, headers });

  test("malformed JSON → 400 invalid_json", async () => {
    await expectShape(await post('{"name": "x",', { "content-type": "application/json" }), 400, "invalid_json");
  });
  test("wrong content type → 415", async () => {
    await expectShape(
      await post("name=x&backend=ollama", { "content-type": "application/x-www-form-urlencoded" }),
      415,
      "unsupported_media_type",
    );
    await expectShape(await post('{"name":"x"}', { "content-type": "text/plain" }), 415, "unsupported_media_type");
  });
  test("body over the configured limit → 413, whether declared or streamed", async () => {
    const big = JSON.stringify({ name: "x", backend: "ollama", model_name: "m", description: "y".repeat(5000) });
    await expectShape(await post(big, { "content-type": "application/json" }), 413, "payload_too_large");
    const stream = new ReadableStream({
      start(c) {
        c.enqueue(new TextEncoder().encode(big));
        c.close();
      },
    });
    await expectShape(await post(stream, { "content-type": "application/json" }), 413, "payload_too_large");
  });
  test("a JSON value that is not an object → 400 validation_error", async () => {
    for (const raw of ["[]", "null", "42", '"str"']) {
      await expectShape(await post(raw, { "content-type": "application/json" }), 400, "validation_error");
    }
  });
  test("an empty body → 400 validation_error", async () => {
    await expectShape(await post("", { "content-type": "application/json" }), 400, "validation_error");
  });
  test("invalid UTF-8 → 400 invalid_json", async () => {
    await expectShape(
      await post(new Uint8Array([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x7d]), { "content-type": "application/json" }),
      400,
      "invalid_json",
    );
  });
  test("unknown route → 404 in the same shape, never Elysia's default body", async () => {
    const body = await expectShape(await s.call("/api/nothing-here", ctx.sdk), 404, "not_found");
    expect(JSON.stringify(body)).not.toContain("schema");
    await expectShape(await s.admin("/admin/nothing"), 404, "not_found");
  });
  test("wrong method on a known path → 404 in the contract's shape", async () => {
    await expectShape(await s.call("/api/projects/input/workloads", ctx.sdk, { method: "PUT", body: {} }), 404);
  });
  test("validation errors never echo the schema", async () => {
    const r = await post(JSON.stringify({ name: 1 }), { "content-type": "application/json" });
    const text = await r.text();
    expect(r.status).toBe(400);
    expect(text).not.toContain("properties");
    expect(text).not.toContain("anyOf");
  });
});

describe("no request can make the server answer 500", () => {
  test("a battery of odd requests all get a 4xx JSON answer and the server stays up", async () => {
    const paths = [
      "/api/projects/%ZZ/workloads",
      "/api/workloads/%E0%A4%A",
      "/endpoint/%ZZ/x/v1/models",
      "/endpoint/input/%ZZ/v1/models",
      "/admin/projects/%ZZ",
      "/api/workloads/" + "x".repeat(5000),
      "/api/projects/input/workloads?x=%ZZ",
      "/endpoint/input",
      "/endpoint/input/",
      "/admin/workloads/..%2F..%2Fetc%2Fpasswd",
    ];
    const tokensToTry = [ctx.sdk, ctx.live, s.adminToken, undefined, "ik_live_%00%00"];
    const seenOk: string[] = [];
    const bodies: (string | undefined)[] = [
      undefined,
      "{",
      '{"name":{"$gt":""}}',
      JSON.stringify({ name: "a".repeat(300) }),
      "[[[[[[[[[[[[]]]]]]]]]]]]",
    ];
    for (const path of paths) {
      for (const token of tokensToTry) {
        for (const raw of bodies) {
          for (const method of raw === undefined ? ["GET", "DELETE"] : ["POST", "PATCH"]) {
            const headers: Record<string, string> = raw === undefined ? {} : { "content-type": "application/json" };
            if (token !== undefined) headers.authorization = `Bearer ${token}`;
            const r = await fetch(s.url + path, { method, headers, body: raw });
            expect({ path, method, status: r.status }).toEqual({ path, method, status: expect.any(Number) });
            expect(r.status).toBeLessThan(500);
            const body = r.status === 204 ? {} : await r.json();
            if (r.status >= 400) expect((body as { error?: unknown }).error).toBeDefined();
            else seenOk.push(`${method} ${path.slice(0, 40)} ${r.status}`);
          }
        }
      }
    }
    // The only successes are legitimate: the sdk key listing its own project's workloads.
    expect([...new Set(seenOk)]).toEqual(["GET /api/projects/input/workloads?x=%ZZ 200"]);
    expect((await fetch(s.url + "/healthz")).status).toBe(200);
  });
});
