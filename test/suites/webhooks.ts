import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import Stripe from "stripe";
import { Webhook } from "standardwebhooks";
import { cleanup, tempDir, waitFor } from "../helpers/proc";
import { startServing, type Serving } from "../helpers/serving";
import { makeTestPki, type TestPki } from "../fixtures/tls";
import { startReceiver, type Receiver } from "../fixtures/receiver";
import { startDns, type DnsServer } from "../fixtures/dns";
import type { Engine } from "../helpers/postgres";

/**
 * Async jobs delivered to real HTTPS receivers on loopback (a self-signed CA trusted through
 * --webhook-ca-file, LAN receivers allowed with --allow-private-webhooks), with a shortened retry
 * schedule: headers, body, both signature schemes, fan-out to 10 destinations, retries, terminal
 * state, at-least-once, redirects, timeouts, and the URL rules (with a DNS whose answers change).
 */
export function webhooksSuite(engine: Engine): void {
  let pki: TestPki;
  let dns: DnsServer;
  let s: Serving;
  let w: { id: string; slug: string };
  const receivers: Receiver[] = [];
  const receiver = async (opts: Partial<Parameters<typeof startReceiver>[0]> = {}) => {
    const r = await startReceiver({ pki, ...opts });
    receivers.push(r);
    return r;
  };
  const addHook = async (workloadId: string, url: string) => {
    const r = await s.admin(`/admin/workloads/${workloadId}/webhooks`, { body: { url } });
    expect(r.status).toBe(201);
    return r.json() as Promise<{ id: string; url: string; secret: string; secret_prefix: string }>;
  };
  const submit = async (workload: string, envelope: unknown) => {
    const r = await s.data(workload, "/jobs", { body: envelope });
    expect(r.status).toBe(202);
    return ((await r.json()) as { job_id: string }).job_id;
  };
  const job = async (workload: string, id: string) => (await (await s.data(workload, `/jobs/${id}`)).json()) as any;

  beforeAll(async () => {
    pki = makeTestPki(tempDir("pki"), ["localhost", "hook.test", "rebind.test"]);
    dns = await startDns({ records: { "hook.test": ["127.0.0.1"], localhost: ["127.0.0.1"] } });
    s = await startServing(
      {
        INFERD_ALLOW_PRIVATE_WEBHOOKS: "1",
        INFERD_WEBHOOK_CA_FILE: pki.caFile,
        INFERD_WEBHOOK_RETRY_SCHEDULE: "200ms,200ms,200ms,200ms,200ms",
        INFERD_WEBHOOK_DNS_SERVERS: dns.server,
      },
      [],
      undefined,
      engine,
    );
    w = await s.createWorkload({
      name: "jobs",
      backend: "vllm",
      model_name: "job-model",
      config: { command: "vllm serve job-model" },
    });
    await s.waitState(w.id);
  });
  afterAll(async () => {
    await s.stop();
    await Promise.all(receivers.map((r) => r.close()));
    await dns.close();
    await cleanup();
  });

  describe("a job's result reaches its destination", () => {
    test("202 with a UUID, then a signed job.completed with every header, the data and the context byte for byte", async () => {
      const rcv = await receiver();
      const wl = await s.createWorkload({
        name: "one-dest",
        backend: "vllm",
        model_name: "one",
        config: { command: "vllm serve one" },
      });
      const hook = await addHook(wl.id, rcv.url("/hooks/inferd?src=test"));
      expect(hook.secret).toStartWith("whsec_");
      expect(hook.secret.startsWith(hook.secret_prefix)).toBe(true);
      const listed = await (await s.admin(`/admin/workloads/${wl.id}/webhooks`)).text();
      expect(listed).not.toContain(hook.secret);
      expect(JSON.parse(listed)[0]).toMatchObject({ id: hook.id, secret_prefix: hook.secret_prefix });

      const context = '{"order" : 42, "price": 1.50, "note":"é"}';
      const r = await s.data(wl.slug, "/jobs", {
        raw: `{"kind":"chat","body":{"messages":[{"role":"user","content":"deliver me"}],"stream":true},"context":${context}}`,
        headers: { "content-type": "application/json" },
      });
      expect(r.status).toBe(202);
      const { job_id } = await r.json();
      expect(job_id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);

      const [got] = await rcv.waitForRequests(1, 20_000);
      expect(got.method).toBe("POST");
      expect(got.path).toBe("/hooks/inferd?src=test");
      expect(got.headers["content-type"]).toBe("application/json");
      expect(got.headers["x-service-event"]).toBe("job");
      expect(got.headers["x-service-job-id"]).toBe(job_id);
      expect(got.headers["x-service-signature"]).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);
      expect(got.rawBody).toContain(`"context":${context}`);
      const body = JSON.parse(got.rawBody);
      expect(body).toMatchObject({
        event: "job.completed",
        job_id,
        data: { job_id, status: "ok", output: "You said: deliver me" },
      });
      expect(new Date(body.ts).toISOString()).toBe(body.ts);
      expect(body.data.usage).toMatchObject({
        input_tokens: expect.any(Number),
        output_tokens: expect.any(Number),
        total_tokens: expect.any(Number),
      });
      expect(body.data.metrics).toMatchObject({ queue_ms: expect.any(Number), run_ms: expect.any(Number) });
      expect(body.data.payload.object).toBe("chat.completion");

      const stripe = new Stripe("sk_test_unused");
      await stripe.webhooks.constructEventAsync(got.rawBody, got.headers["x-service-signature"], hook.secret);
      await expect(
        stripe.webhooks.constructEventAsync(
          got.rawBody.replace("deliver me", "deliver you"),
          got.headers["x-service-signature"],
          hook.secret,
        ),
      ).rejects.toThrow();
      new Webhook(hook.secret).verify(got.rawBody, {
        "webhook-id": got.headers["webhook-id"],
        "webhook-timestamp": got.headers["webhook-timestamp"],
        "webhook-signature": got.headers["webhook-signature"],
      });

      const after = await waitFor(
        async () => {
          const j = await job(wl.slug, job_id);
          return j.deliveries[0]?.state === "delivered" ? j : undefined;
        },
        { what: "delivery recorded" },
      );
      expect(after).toMatchObject({ job_id, kind: "chat", status: "completed", data: { status: "ok" } });
      expect(after.deliveries[0]).toMatchObject({ webhook_id: hook.id, attempts: 1, last_status_code: 200 });
    });

    test("a job without context has no context field; a failed job is delivered as job.failed with the error", async () => {
      const rcv = await receiver();
      const wl = await s.createWorkload({
        name: "fails",
        backend: "vllm",
        model_name: "fails",
        config: { command: "vllm serve fails" },
      });
      await addHook(wl.id, rcv.url("/"));
      const id = await submit(wl.slug, { kind: "embeddings", body: { dimensions: "not a number" } });
      const [got] = await rcv.waitForRequests(1, 20_000);
      const body = JSON.parse(got.rawBody);
      expect(body).not.toHaveProperty("context");
      expect(body.event).toBe("job.failed");
      expect(body.data).toMatchObject({ job_id: id, status: "error", error: { http_status: 400 } });
      expect(body.data.error.message.length).toBeGreaterThan(0);
      expect((await job(wl.slug, id)).status).toBe("failed");
    });

    test("the Test action sends a signed ping and answers with what the receiver returned", async () => {
      const rcv = await receiver({ behaviour: () => ({ status: 202, body: "pong" }) });
      const hook = await addHook(w.id, rcv.url("/ping"));
      const r = await s.admin(`/admin/webhooks/${hook.id}/test`, { method: "POST" });
      expect(r.status).toBe(200);
      expect(await r.json()).toMatchObject({ ok: true, status_code: 202, body: "pong" });
      const [got] = await rcv.waitForRequests(1);
      expect(got.headers["x-service-event"]).toBe("ping");
      expect(got.headers["x-service-job-id"]).toBeUndefined();
      const stripe = new Stripe("sk_test_unused");
      await stripe.webhooks.constructEventAsync(got.rawBody, got.headers["x-service-signature"], hook.secret);
      await s.admin(`/admin/webhooks/${hook.id}`, { method: "DELETE" });
    });
  });

  describe("fan-out, retries and the terminal state", () => {
    test("10 destinations, one failing: the others get it once; the failing one is retried to terminal after 6 attempts", async () => {
      const wl = await s.createWorkload({
        name: "fanout",
        backend: "vllm",
        model_name: "fan",
        config: { command: "vllm serve fan" },
      });
      const good = await Promise.all(Array.from({ length: 9 }, () => receiver()));
      const bad = await receiver({ behaviour: () => ({ status: 500, body: "down" }) });
      for (const r of good) await addHook(wl.id, r.url("/ok"));
      const badHook = await addHook(wl.id, bad.url("/down"));
      const eleventh = await s.admin(`/admin/workloads/${wl.id}/webhooks`, { body: { url: good[0].url("/extra") } });
      expect(eleventh.status).toBe(409);

      const id = await submit(wl.slug, { kind: "embeddings", body: { input: "fan out" }, context: { n: 1 } });
      await Promise.all(good.map((r) => r.waitForRequests(1, 20_000)));
      await bad.waitForRequests(6, 20_000);
      const final = await waitFor(
        async () => {
          const j = await job(wl.slug, id);
          return j.deliveries.find((d: { webhook_id: string }) => d.webhook_id === badHook.id)?.state === "terminal"
            ? j
            : undefined;
        },
        { what: "terminal delivery" },
      );
      expect(final.deliveries.filter((d: { state: string }) => d.state === "delivered")).toHaveLength(9);
      const dead = final.deliveries.find((d: { webhook_id: string }) => d.webhook_id === badHook.id);
      expect(dead).toMatchObject({ attempts: 6, last_status_code: 500, next_attempt_at: null });
      for (const r of good) expect(r.requests()).toHaveLength(1);
      expect(bad.requests()).toHaveLength(6);
      const gaps = bad
        .requests()
        .slice(1)
        .map((r, i) => r.at - bad.requests()[i].at);
      expect(Math.min(...gaps)).toBeGreaterThanOrEqual(190);
      const attempts = await (await s.admin(`/admin/deliveries/${dead.id}/attempts`)).json();
      expect(attempts.map((a: { n: number; status_code: number }) => [a.n, a.status_code])).toEqual(
        [1, 2, 3, 4, 5, 6].map((n) => [n, 500]),
      );
    });

    test("at least once: a receiver too slow to answer in 3 s gets the job again with the same ids, and can dedupe", async () => {
      const wl = await s.createWorkload({
        name: "slowhook",
        backend: "vllm",
        model_name: "slowhook",
        config: { command: "vllm serve slowhook" },
      });
      const rcv = await receiver({
        behaviour: (_r, i) => (i === 0 ? { status: 200, delayMs: 3500 } : { status: 200 }),
      });
      await addHook(wl.id, rcv.url("/"));
      const id = await submit(wl.slug, { kind: "embeddings", body: { input: "twice" } });
      const [first, second] = await rcv.waitForRequests(2, 20_000);
      expect(JSON.parse(first.rawBody).job_id).toBe(id);
      expect(JSON.parse(second.rawBody).job_id).toBe(id);
      expect(second.headers["webhook-id"]).toBe(first.headers["webhook-id"]);
      const d = await waitFor(
        async () => (await job(wl.slug, id)).deliveries.find((x: { state: string }) => x.state === "delivered"),
        { what: "delivered on the second attempt" },
      );
      expect(d.attempts).toBe(2);
      const attempts = await (await s.admin(`/admin/deliveries/${d.id}/attempts`)).json();
      expect(attempts[0].error).toContain("no answer within 3 s");
    });

    test("redirects are not followed", async () => {
      const wl = await s.createWorkload({
        name: "redirect",
        backend: "vllm",
        model_name: "redir",
        config: { command: "vllm serve redir" },
      });
      const rcv = await receiver({
        behaviour: (r) => (r.path === "/moved" ? { status: 307, redirectTo: "/elsewhere" } : { status: 200 }),
      });
      await addHook(wl.id, rcv.url("/moved"));
      const id = await submit(wl.slug, { kind: "embeddings", body: { input: "x" } });
      await rcv.waitForRequests(2, 20_000);
      expect(rcv.requests().every((r) => r.path === "/moved")).toBe(true);
      const d = await waitFor(
        async () => (await job(wl.slug, id)).deliveries[0]?.attempts >= 2 && (await job(wl.slug, id)).deliveries[0],
        { what: "two attempts" },
      );
      expect(d.last_status_code).toBe(307);
      expect(d.last_error).toContain("not followed");
    });
  });

  describe("toggles", () => {
    test("with jobs off, submissions are refused and nothing is delivered anywhere until it is on again", async () => {
      const wl = await s.createWorkload({
        name: "toggle-jobs",
        backend: "vllm",
        model_name: "tj",
        config: { command: "vllm serve tj" },
      });
      const rcv = await receiver({ behaviour: (_r, i) => (i === 0 ? { status: 503 } : { status: 200 }) });
      await addHook(wl.id, rcv.url("/"));
      const id = await submit(wl.slug, { kind: "embeddings", body: { input: "held" } });
      await rcv.waitForRequests(1, 20_000);
      await s.admin(`/admin/workloads/${wl.id}/endpoints`, { method: "PATCH", body: { jobs: false } });
      const refused = await s.data(wl.slug, "/jobs", { body: { kind: "embeddings", body: { input: "x" } } });
      expect(refused.status).toBe(409);
      expect((await refused.json()).error.code).toBe("endpoint_disabled");
      // Let the delivery loop run past the retry time: a control delivery of another workload goes through it.
      const control = await receiver();
      await addHook(w.id, control.url("/control"));
      await submit(w.slug, { kind: "embeddings", body: { input: "control" } });
      await control.waitForRequests(1, 20_000);
      await waitFor(
        async () =>
          (await job(wl.slug, id)).deliveries[0]?.next_attempt_at &&
          Date.parse((await job(wl.slug, id)).deliveries[0].next_attempt_at) < Date.now() - 400,
        { what: "the retry time passed" },
      );
      expect(rcv.requests()).toHaveLength(1);
      await s.admin(`/admin/workloads/${wl.id}/endpoints`, { method: "PATCH", body: { jobs: true } });
      await rcv.waitForRequests(2, 20_000);

      await s.admin(`/admin/workloads/${wl.id}/endpoints`, { method: "PATCH", body: { embeddings: false } });
      const modality = await s.data(wl.slug, "/jobs", { body: { kind: "embeddings", body: { input: "x" } } });
      expect(modality.status).toBe(409);
    });
  });

  describe("destination URL rules", () => {
    test("https only, no credentials, a host that resolves", async () => {
      for (const [url, why] of [
        ["http://localhost/hook", "https"],
        ["https://user:pw@localhost/hook", "credentials"],
        ["not a url", "valid URL"],
        ["https://nowhere.test/hook", "does not resolve"],
      ]) {
        const r = await s.admin(`/admin/workloads/${w.id}/webhooks`, { body: { url } });
        expect(r.status).toBe(400);
        const e = (await r.json()).error;
        expect(e.code).toBe("invalid_webhook_url");
        expect(e.message).toContain(why);
      }
    });

    test("without --allow-private-webhooks: loopback, private and CGNAT are refused at save, and a name that turns private is refused at delivery", async () => {
      const strict = await startServing(
        {
          INFERD_WEBHOOK_CA_FILE: pki.caFile,
          INFERD_WEBHOOK_RETRY_SCHEDULE: "200ms,200ms,200ms,200ms,200ms",
          INFERD_WEBHOOK_DNS_SERVERS: dns.server,
        },
        [],
        undefined,
        engine,
      );
      try {
        const sw = await strict.createWorkload({
          name: "strict",
          backend: "vllm",
          model_name: "strict",
          config: { command: "vllm serve strict" },
        });
        const rcv = await receiver({ hostname: "rebind.test" });
        dns.set("lan.test", ["192.168.1.20"]);
        dns.set("cgnat.test", ["100.64.3.4"]);
        dns.set("mapped.test", ["::ffff:127.0.0.1"]);
        dns.set("mixed.test", ["8.8.8.8", "10.0.0.1"]);
        for (const url of [
          rcv.url("/", "localhost"),
          "https://127.0.0.1:1/x",
          "https://[::1]:1/x",
          "https://lan.test/x",
          "https://cgnat.test/x",
          "https://mapped.test/x",
          "https://mixed.test/x",
          "https://169.254.169.254/latest",
        ]) {
          const r = await strict.admin(`/admin/workloads/${sw.id}/webhooks`, { body: { url } });
          expect({ url, status: r.status }).toEqual({ url, status: 400 });
        }
        // Public at save (nothing is sent then), loopback by delivery time: refused, never connected.
        dns.set("rebind.test", ["8.8.8.8"]);
        const saved = await strict.admin(`/admin/workloads/${sw.id}/webhooks`, { body: { url: rcv.url("/rebind") } });
        expect(saved.status).toBe(201);
        dns.set("rebind.test", ["127.0.0.1"]);
        const r = await strict.data(sw.slug, "/jobs", { body: { kind: "embeddings", body: { input: "x" } } });
        const { job_id } = await r.json();
        const d = await waitFor(
          async () => {
            const j = (await (await strict.data(sw.slug, `/jobs/${job_id}`)).json()) as any;
            return j.deliveries[0]?.attempts >= 1 ? j.deliveries[0] : undefined;
          },
          { what: "a refused attempt", timeoutMs: 20_000 },
        );
        expect(d.last_error).toContain("127.0.0.1");
        expect(d.last_status_code).toBeNull();
        expect(rcv.requests()).toHaveLength(0);
      } finally {
        await strict.stop();
      }
    });
  });

  describe("receivers addressed by IP", () => {
    test("a destination written as an IP address is tested and delivered to (certificate for the IP)", async () => {
      const rcv = await receiver();
      const hook = await addHook(w.id, `https://127.0.0.1:${rcv.port}/by-ip`);
      const r = await s.admin(`/admin/webhooks/${hook.id}/test`, { method: "POST" });
      expect(r.status).toBe(200);
      expect(await r.json()).toMatchObject({ ok: true, status_code: 200 });
      await s.admin(`/admin/webhooks/${hook.id}`, { method: "DELETE" });
    });
  });

  describe("extra CAs", () => {
    test("NODE_EXTRA_CA_CERTS alone makes a self-signed receiver trusted", async () => {
      const other = await startServing(
        { INFERD_ALLOW_PRIVATE_WEBHOOKS: "1", NODE_EXTRA_CA_CERTS: pki.caFile },
        [],
        undefined,
        engine,
      );
      try {
        const ow = await other.createWorkload({ name: "ca", backend: "ollama", model_name: "m" });
        const rcv = await receiver();
        const hook = await (
          await other.admin(`/admin/workloads/${ow.id}/webhooks`, { body: { url: rcv.url("/ca") } })
        ).json();
        const r = await (await other.admin(`/admin/webhooks/${hook.id}/test`, { method: "POST" })).json();
        expect(r).toMatchObject({ ok: true, status_code: 200 });
      } finally {
        await other.stop();
      }
    });
  });
}
