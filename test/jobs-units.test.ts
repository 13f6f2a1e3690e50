import { describe, expect, test } from "bun:test";
import Stripe from "stripe";
import { Webhook } from "standardwebhooks";
import { rawField } from "../src/jobs/raw";
import { parseSchedule, deliveryBody, DEFAULT_SCHEDULE_MS } from "../src/webhooks/deliver";
import { deliveryHeaders, newSigningSecret } from "../src/webhooks/sign";
import { isAllowedAddress } from "../agent/net/address";
import { buildJobData, wavSeconds } from "../src/jobs/result";

describe("context comes back byte for byte", () => {
  test.each([
    [
      '{"kind":"chat","context":{"order": 7, "price": 1.50, "tags":["a","b"]}}',
      '{"order": 7, "price": 1.50, "tags":["a","b"]}',
    ],
    ['{"context" : "a \\"quoted\\" }{ string" , "kind":"x"}', '"a \\"quoted\\" }{ string"'],
    ['{"context":1e3}', "1e3"],
    ['{"context":null}', "null"],
    ['{"a":{"context":1},"b":[{"context":2}]}', undefined],
    ['{"context":1,"context":[ 2 ]}', "[ 2 ]"],
    ['{"k":"\\u0063ontext","\\u0063ontext":true}', "true"],
  ])("rawField(%j)", (text, expected) => {
    JSON.parse(text);
    expect(rawField(text, "context")).toBe(expected as string);
  });

  test("the delivery body splices the raw context in and stays valid JSON", () => {
    const body = deliveryBody("job.completed", "j1", '{"price": 1.50}', '{"status":"ok"}');
    expect(body).toContain('"context":{"price": 1.50}');
    expect(JSON.parse(body)).toMatchObject({
      event: "job.completed",
      job_id: "j1",
      context: { price: 1.5 },
      data: { status: "ok" },
    });
    expect(JSON.parse(deliveryBody("job.failed", "j2", null, "{}"))).not.toHaveProperty("context");
  });
});

describe("signatures", () => {
  const secret = newSigningSecret();
  const body = deliveryBody("job.completed", "job-123", '{"x":1}', '{"job_id":"job-123","status":"ok"}');
  const headers = deliveryHeaders({ secret, event: "job", jobId: "job-123", messageId: "msg_dlv_1", body });

  test("Stripe's verifier accepts X-Service-Signature and rejects a tampered body", async () => {
    const stripe = new Stripe("sk_test_unused");
    const event = await stripe.webhooks.constructEventAsync(body, headers["x-service-signature"], secret);
    expect((event as unknown as { job_id: string }).job_id).toBe("job-123");
    await expect(
      stripe.webhooks.constructEventAsync(body.replace("ok", "OK"), headers["x-service-signature"], secret),
    ).rejects.toThrow();
    await expect(
      stripe.webhooks.constructEventAsync(body, headers["x-service-signature"], newSigningSecret()),
    ).rejects.toThrow();
  });

  test("the standardwebhooks package accepts the Standard Webhooks headers", () => {
    const wh = new Webhook(secret);
    const payload = wh.verify(body, {
      "webhook-id": headers["webhook-id"],
      "webhook-timestamp": headers["webhook-timestamp"],
      "webhook-signature": headers["webhook-signature"],
    });
    expect(payload).toMatchObject({ job_id: "job-123" });
    expect(() =>
      wh.verify(body + " ", {
        "webhook-id": headers["webhook-id"],
        "webhook-timestamp": headers["webhook-timestamp"],
        "webhook-signature": headers["webhook-signature"],
      }),
    ).toThrow();
  });

  test("headers: event, job id, signature format; none without a secret", () => {
    expect(headers).toMatchObject({
      "content-type": "application/json",
      "x-service-event": "job",
      "x-service-job-id": "job-123",
    });
    expect(headers["x-service-signature"]).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);
    const unsigned = deliveryHeaders({ secret: null, event: "ping", messageId: "ping_1", body: "{}" });
    expect(unsigned["x-service-signature"]).toBeUndefined();
    expect(unsigned["x-service-job-id"]).toBeUndefined();
    expect(unsigned["x-service-event"]).toBe("ping");
  });
});

describe("settings and address rules", () => {
  test("retry schedules parse; the default is the contract's", () => {
    expect(parseSchedule("1s,1s,1s,1s,1s")).toEqual([1000, 1000, 1000, 1000, 1000]);
    expect(parseSchedule("1m,5m,15m,1h,6h")).toEqual(DEFAULT_SCHEDULE_MS);
    expect(parseSchedule("250ms, 2s")).toEqual([250, 2000]);
    expect(() => parseSchedule("soon")).toThrow("not a duration");
  });

  test.each([
    ["8.8.8.8", true],
    ["2606:4700:4700::1111", true],
    ["127.0.0.1", false],
    ["10.1.2.3", false],
    ["172.16.0.1", false],
    ["192.168.1.1", false],
    ["169.254.169.254", false],
    ["100.64.0.1", false],
    ["0.0.0.0", false],
    ["224.0.0.1", false],
    ["::1", false],
    ["fe80::1", false],
    ["fd12::1", false],
    ["::ffff:127.0.0.1", false],
    ["::ffff:10.0.0.1", false],
    ["::ffff:8.8.8.8", true],
    ["::", false],
  ])("%s allowed: %s", (addr, ok) => {
    expect(isAllowedAddress(addr, false)).toBe(ok);
  });

  test("--allow-private-webhooks lets LAN and loopback through, never unspecified or multicast", () => {
    expect(isAllowedAddress("127.0.0.1", true)).toBe(true);
    expect(isAllowedAddress("192.168.1.1", true)).toBe(true);
    expect(isAllowedAddress("0.0.0.0", true)).toBe(false);
    expect(isAllowedAddress("224.0.0.1", true)).toBe(false);
  });
});

describe("result data", () => {
  const metrics = { queue_ms: 1, run_ms: 2, runs: 1 };
  test("chat: payload, output and usage", () => {
    const bytes = new TextEncoder().encode(
      JSON.stringify({ choices: [{ message: { content: "hi" } }], usage: { prompt_tokens: 3, completion_tokens: 2 } }),
    );
    expect(buildJobData("j", "chat", 200, "application/json", bytes, metrics)).toMatchObject({
      status: "ok",
      output: "hi",
      usage: { input_tokens: 3, output_tokens: 2, total_tokens: 5 },
      metrics,
    });
  });
  test("audio: binary_b64, content_type and seconds", () => {
    const wav = new Uint8Array(44 + 32000);
    const dv = new DataView(wav.buffer);
    wav.set(new TextEncoder().encode("RIFF"), 0);
    wav.set(new TextEncoder().encode("WAVEfmt "), 8);
    dv.setUint32(16, 16, true);
    dv.setUint32(28, 16000, true);
    wav.set(new TextEncoder().encode("data"), 36);
    dv.setUint32(40, 32000, true);
    expect(wavSeconds(wav)).toBe(2);
    const d = buildJobData("j", "audio_speech", 200, "audio/wav", wav, metrics);
    expect(d).toMatchObject({ status: "ok", content_type: "audio/wav", units: { audio_seconds: 2 } });
    expect(Buffer.from(d.binary_b64!, "base64").equals(Buffer.from(wav))).toBe(true);
  });
  test("a runtime refusal is an error status carrying the runtime's message", () => {
    const d = buildJobData(
      "j",
      "embeddings",
      400,
      "application/json",
      new TextEncoder().encode('{"error":{"message":"input too long"}}'),
      metrics,
    );
    expect(d).toMatchObject({ status: "error", error: { http_status: 400, message: "input too long" } });
  });
});
