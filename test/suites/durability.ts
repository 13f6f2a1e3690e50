import { afterAll, describe, expect, test } from "bun:test";
import { cleanup, isAlive, startInferd, tempDir, waitFor, type Inferd } from "../helpers/proc";
import { join } from "node:path";
import { fixtureEnv, readRecord } from "../fixtures";
import { makeTestPki } from "../fixtures/tls";
import { startReceiver, type Receiver } from "../fixtures/receiver";
import type { Engine } from "../helpers/postgres";

/**
 * Nothing accepted is lost: `kill -9` of inferd with jobs queued, one running and deliveries
 * pending, then a restart on the same data dir completes every job and delivers every result.
 */
export function durabilitySuite(engine: Engine): void {
  const receivers: Receiver[] = [];
  let server: Inferd | undefined;
  afterAll(async () => {
    await server?.stop().catch(() => 0);
    await Promise.all(receivers.map((r) => r.close()));
    await cleanup();
  });

  describe("crash safety", () => {
    test("kill -9 with jobs queued and deliveries pending; the restart completes and delivers them all", async () => {
      const pki = makeTestPki(tempDir("pki"), ["localhost"]);
      const failing = await startReceiver({ pki, behaviour: () => ({ status: 500 }) });
      receivers.push(failing);
      const record = join(tempDir("record"), "events.jsonl");
      const env = fixtureEnv({
        FAKE_RECORD: record,
        INFERD_LOCAL_AGENT: "1",
        INFERD_ALLOW_PRIVATE_WEBHOOKS: "1",
        INFERD_WEBHOOK_CA_FILE: pki.caFile,
        INFERD_WEBHOOK_RETRY_SCHEDULE: "300ms,300ms,300ms,300ms,300ms",
        INFERD_RESTART_BACKOFF_MS: "100",
        FAKE_GPUS: "1x NVIDIA GeForce RTX 4090:24564",
        FAKE_LOAD_MS: "50",
        FAKE_DELAY_MS: "300",
      });
      const dataDir = tempDir("durable");
      server = await startInferd({ env, dataDir, engine });
      const admin = (path: string, body?: unknown, method?: string) =>
        fetch(server!.url + path, {
          method: method ?? (body ? "POST" : "GET"),
          headers: { authorization: `Bearer ${server!.adminToken}`, "content-type": "application/json" },
          body: body ? JSON.stringify(body) : undefined,
        });
      await admin("/admin/projects", { name: "Durable", slug: "durable" });
      const live = (await (await admin("/admin/projects/durable/keys", { name: "k", type: "live" })).json()).secret;
      const wl = await (
        await admin("/admin/projects/durable/workloads", {
          name: "jobs",
          backend: "vllm",
          model_name: "m",
          config: { command: "vllm serve m" },
        })
      ).json();
      const hook = await (await admin(`/admin/workloads/${wl.id}/webhooks`, { url: failing.url("/hook") })).json();
      expect(hook.id).toBeString();
      // One slot, so most jobs wait in the queue while one runs.
      const detail = await waitFor(
        async () => {
          const d = await (await admin(`/admin/workloads/${wl.id}`)).json();
          return d.assignments[0]?.state === "ready" ? d : undefined;
        },
        { what: "ready", timeoutMs: 30_000 },
      );
      await admin(`/admin/assignments/${detail.assignments[0].id}`, { concurrency: 1 }, "PATCH");

      const submit = async (i: number) => {
        const r = await fetch(`${server!.url}/endpoint/durable/jobs/jobs`, {
          method: "POST",
          headers: { authorization: `Bearer ${live}`, "content-type": "application/json" },
          body: JSON.stringify({ kind: "embeddings", body: { input: `item ${i}` }, context: { i } }),
        });
        expect(r.status).toBe(202);
        return (await r.json()).job_id as string;
      };
      const ids: string[] = [];
      for (let i = 0; i < 8; i++) ids.push(await submit(i));
      // Wait until some results were tried at the (failing) receiver while others are still queued.
      await failing.waitForRequests(2, 30_000);
      const before = await Promise.all(
        ids.map(
          async (id) =>
            (
              await (
                await fetch(`${server!.url}/endpoint/durable/jobs/jobs/${id}`, {
                  headers: { authorization: `Bearer ${live}` },
                })
              ).json()
            ).status,
        ),
      );
      expect(before.filter((st) => st === "queued" || st === "running").length).toBeGreaterThan(0);

      const runtimePids = readRecord(record)
        .filter((e) => e.event === "start")
        .map((e) => e.pid as number);
      expect(runtimePids.length).toBeGreaterThan(0);
      await server.kill9();
      await failing.close();
      const ok = await startReceiver({ pki, port: failing.port });
      receivers.push(ok);

      server = await startInferd({ env: { ...env, ...server.storeEnv }, dataDir });
      const deliveredIds = new Set<string>();
      await waitFor(
        () => {
          for (const r of ok.requests()) deliveredIds.add(JSON.parse(r.rawBody).job_id);
          return deliveredIds.size === ids.length || undefined;
        },
        { what: "every job delivered after the restart", timeoutMs: 60_000, intervalMs: 100 },
      );
      expect([...deliveredIds].sort()).toEqual([...ids].sort());
      const contexts = ok.requests().map((r) => JSON.parse(r.rawBody).context.i as number);
      expect(new Set(contexts).size).toBe(ids.length);
      const after = await Promise.all(
        ids.map(
          async (id) =>
            await (
              await fetch(`${server!.url}/endpoint/durable/jobs/jobs/${id}`, {
                headers: { authorization: `Bearer ${live}` },
              })
            ).json(),
        ),
      );
      expect(after.every((j) => j.status === "completed" && j.deliveries[0].state === "delivered")).toBe(true);
      // The runtime the crashed inferd left behind was stopped by the restart.
      const alive = runtimePids.filter(isAlive);
      expect(alive).toEqual([]);
    });
  });
}
