import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, statSync } from "node:fs";
import { join } from "node:path";
import { cleanup, tempDir, waitFor } from "./helpers/proc";
import { joinAgent, rerunAgent, spawnAgent, startHost, type AgentProc, type Host } from "./helpers/agents";
import { sseEvents } from "./helpers/serving";

/**
 * A host and two remote agents on loopback over HTTPS (the host's generated certificate): one
 * workload served from both, slots spread, failover on kill -9, rejoin, refusals.
 */
let host: Host;
let live: string;
const agents: AgentProc[] = [];
beforeAll(async () => {
  host = await startHost();
  await host.admin("/admin/projects", { name: "Fleet", slug: "fleet" });
  live = (await (await host.admin("/admin/projects/fleet/keys", { name: "k", type: "live" })).json()).secret;
});
afterAll(async () => {
  await Promise.all(agents.map((a) => a.stop().catch(() => 0)));
  await host.stop();
  await cleanup();
});

const chat = (w: string, content: string, extra: Record<string, unknown> = {}) =>
  fetch(`${host.url}/endpoint/fleet/${w}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${live}`, "content-type": "application/json" },
    body: JSON.stringify({ messages: [{ role: "user", content }], ...extra }),
  });
const detail = async (id: string) => (await host.admin(`/admin/workloads/${id}`)).json();
const stats = async (url: string) =>
  (await fetch(`${url}/fake/stats`)).json() as Promise<{ total: number; in_flight: number; max_in_flight: number }>;
async function placeOn(workloadId: string, workers: string[], concurrency: number) {
  for (const worker_id of workers)
    expect((await host.admin(`/admin/workloads/${workloadId}/assignments`, { worker_id, concurrency })).status).toBe(
      201,
    );
  return waitFor(
    async () => {
      const d = await detail(workloadId);
      const mine = d.assignments.filter((a: { worker_id: string }) => workers.includes(a.worker_id));
      return mine.length === workers.length && mine.every((a: { state: string }) => a.state === "ready")
        ? d
        : undefined;
    },
    { what: "replicas ready on the agents", timeoutMs: 30_000 },
  );
}

/** Joins a new agent and places a new workload on it alone (4 slots). */
async function soloWorkload(agentName: string, env: Record<string, string>, name: string, model: string) {
  const agent = await joinAgent(host, agentName, env);
  agents.push(agent);
  const w = await (
    await host.admin("/admin/projects/fleet/workloads", {
      name,
      backend: "vllm",
      model_name: model,
      config: { command: `vllm serve ${model}` },
    })
  ).json();
  await placeOn(w.id, [agent.workerId], 4);
  return { agent, w };
}

describe("joining", () => {
  test("an agent joins with the join command, stores its credential (0600) and shows its GPUs", async () => {
    const a = await joinAgent(host, "gpu-a", { FAKE_DELAY_MS: "300" });
    agents.push(a);
    const state = join(a.dataDir, "agent.json");
    expect(statSync(state).mode & 0o777).toBe(0o600);
    const w = (await (await host.admin("/admin/workers")).json()).find((x: { id: string }) => x.id === a.workerId);
    expect(w).toMatchObject({ kind: "remote", state: "online", version: expect.any(String) });
    expect(w.gpus[0]).toMatchObject({ name: "NVIDIA L4", memory_total_mib: 23034 });
  });

  test("a host whose certificate does not match the token is refused, and a used token does not work twice", async () => {
    const created = await (await host.admin("/admin/workers", { name: "pin-check" })).json();
    const [, , , url, , token] = (created.join_command as string).split(" ");
    const forged = token.replace(/\.[0-9a-f]{64}$/, `.${"0".repeat(64)}`);
    const dir = tempDir("agent-forged");
    const bad = spawnAgent(["join", url, "--token", forged], dir);
    expect(await bad.proc.exited).not.toBe(0);
    expect(bad.output()).toContain("does not match the join token");
    expect(existsSync(join(dir, "agent.json"))).toBe(false);
    const ok = spawnAgent(["join", url, "--token", token], tempDir("agent-once"));
    await waitFor(() => ok.output().includes("running as worker") || undefined, { what: "joined", timeoutMs: 20_000 });
    const again = spawnAgent(["join", url, "--token", token], tempDir("agent-twice"));
    expect(await again.proc.exited).not.toBe(0);
    expect(again.output()).toContain("already used");
    ok.proc.kill("SIGTERM");
    await ok.proc.exited;
    await host.admin(`/admin/workers/${created.id}`, undefined, "DELETE");
  });

  test("an agent of another version is told so clearly at join", async () => {
    const created = await (await host.admin("/admin/workers", { name: "old-agent" })).json();
    const [, , , url, , token] = (created.join_command as string).split(" ");
    const r = await fetch(`${url}/agent/v1/join`, {
      method: "POST",
      body: JSON.stringify({
        token,
        version: "9.9.0",
        machine: {
          hostname: "x",
          cpu_cores: 1,
          ram_bytes: 1,
          ram_free_bytes: 1,
          gpus: [],
          load_avg: [0, 0, 0],
          probed_at: new Date().toISOString(),
        },
      }),
      tls: { rejectUnauthorized: false },
    } as RequestInit);
    expect(r.status).toBe(409);
    const e = (await r.json()).error;
    expect(e.code).toBe("version_mismatch");
    expect(e.message).toContain("9.9.0");
    const plain = await fetch(`${host.url}/agent/v1/join`, { method: "POST", body: "{}" });
    expect(plain.status).toBe(403);
    await host.admin(`/admin/workers/${created.id}`, undefined, "DELETE");
  });
});

describe("serving from two agents", () => {
  let w: { id: string; slug: string };
  let b: AgentProc;
  test("requests spread over both agents by free slots; logs and states of remote replicas reach the host", async () => {
    b = await joinAgent(host, "gpu-b", { FAKE_DELAY_MS: "300" });
    agents.push(b);
    w = await (
      await host.admin("/admin/projects/fleet/workloads", {
        name: "shared",
        backend: "vllm",
        model_name: "shared",
        config: { command: "vllm serve shared" },
      })
    ).json();
    const ready = await placeOn(w.id, [agents[0].workerId, b.workerId], 2);
    const urls = ready.assignments
      .filter((a: { state: string }) => a.state === "ready")
      .map((a: { base_url: string }) => a.base_url);
    expect(urls).toHaveLength(2);
    const results = await Promise.all([1, 2, 3, 4].map((i) => chat(w.slug, `req ${i}`)));
    expect(results.map((r) => r.status)).toEqual([200, 200, 200, 200]);
    const [s1, s2] = await Promise.all(urls.map(stats));
    expect([s1.total, s2.total]).toEqual([2, 2]);
    expect(Math.max(s1.max_in_flight, s2.max_in_flight)).toBeLessThanOrEqual(2);
    const stream = await chat(w.slug, "stream from afar", { stream: true });
    const events = await sseEvents(stream);
    expect(events.at(-1)).toBe("[DONE]");
    // An upload reaches a remote runtime byte for byte (read whole for the agent's work message).
    const form = new FormData();
    form.append("model", "shared");
    form.append("file", new Blob([crypto.getRandomValues(new Uint8Array(50_000))]), "clip.wav");
    const sent = new Uint8Array(await new Response(form).arrayBuffer());
    const boundary = new TextDecoder().decode(sent.subarray(2, sent.indexOf(13)));
    const upload = await fetch(`${host.url}/endpoint/fleet/${w.slug}/v1/audio/transcriptions`, {
      method: "POST",
      headers: { authorization: `Bearer ${live}`, "content-type": `multipart/form-data; boundary=${boundary}` },
      body: sent,
    });
    expect(upload.status).toBe(200);
    expect((await upload.json()).sha256).toBe(new Bun.CryptoHasher("sha256").update(sent).digest("hex"));
    const logs = await waitFor(
      async () => {
        const l = await (await host.admin(`/admin/workloads/${w.id}/logs`)).json();
        return l.replicas.length === 2 && l.replicas.every((r: { text: string }) => r.text.includes("Uvicorn running"))
          ? l
          : undefined;
      },
      { what: "remote logs at the host" },
    );
    expect(logs.replicas[0].text).toContain("\x1b[");
  });

  test("kill -9 of an agent mid-load: its queued requests run on the other, no async job is lost, and it takes work again after rejoining", async () => {
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) {
      const r = await fetch(`${host.url}/endpoint/fleet/${w.slug}/jobs`, {
        method: "POST",
        headers: { authorization: `Bearer ${live}`, "content-type": "application/json" },
        body: JSON.stringify({ kind: "embeddings", body: { input: `job ${i}` } }),
      });
      ids.push((await r.json()).job_id);
    }
    const inflight = [1, 2, 3, 4, 5, 6].map((i) => chat(w.slug, `load ${i}`));
    const victim = agents[0];
    await victim.kill9();
    const results = await Promise.all(inflight);
    // Requests not yet answered by the lost agent ran on the other; none hangs or 500s.
    for (const r of results) expect([200, 502, 503]).toContain(r.status);
    expect(results.filter((r) => r.status === 200).length).toBeGreaterThanOrEqual(4);
    const jobs = await waitFor(
      async () => {
        const all = await Promise.all(
          ids.map(async (id) =>
            (
              await fetch(`${host.url}/endpoint/fleet/${w.slug}/jobs/${id}`, {
                headers: { authorization: `Bearer ${live}` },
              })
            ).json(),
          ),
        );
        return all.every((j) => j.status === "completed") ? all : undefined;
      },
      { what: "every job completed despite the lost agent", timeoutMs: 30_000 },
    );
    expect(jobs).toHaveLength(6);
    await waitFor(
      async () =>
        (await (await host.admin("/admin/workers")).json()).find((x: { id: string }) => x.id === victim.workerId)
          ?.state === "offline" || undefined,
      { what: "the killed agent offline" },
    );

    const back = await rerunAgent(host, victim, { FAKE_DELAY_MS: "300" });
    agents[0] = back;
    await waitFor(
      async () => {
        const d = await detail(w.id);
        return d.assignments.filter((a: { state: string }) => a.state === "ready").length === 2 || undefined;
      },
      { what: "both replicas ready again", timeoutMs: 30_000 },
    );
    const d = await detail(w.id);
    const mine = d.assignments.find((a: { worker_id: string }) => a.worker_id === back.workerId);
    const before = (await stats(mine.base_url)).total;
    await Promise.all([1, 2, 3, 4].map((i) => chat(w.slug, `after ${i}`)));
    expect((await stats(mine.base_url)).total).toBeGreaterThan(before);
  });

  test("a deleted worker's credential stops working at once and its agent stops its runtimes", async () => {
    const d = await detail(w.id);
    const bReplica = d.assignments.find((a: { worker_id: string }) => a.worker_id === b.workerId);
    const r = await host.admin(`/admin/workers/${b.workerId}`, undefined, "DELETE");
    expect(r.status).toBe(200);
    expect(await b.proc.exited).toBe(3);
    expect(b.output()).toContain("deleted from the host");
    await waitFor(
      () =>
        fetch(`${bReplica.base_url}/health`).then(
          () => undefined,
          () => true,
        ),
      { what: "the deleted worker's runtime stopped" },
    );
    expect((await chat(w.slug, "still served")).status).toBe(200);
    const local = (await (await host.admin("/admin/workers")).json()).find((x: { kind: string }) => x.kind === "local");
    expect(local).toBeUndefined();
  });
});

describe("the only worker goes away", () => {
  test("its replica shows the worker is offline; requests get 503 at once, jobs wait and run when it is back", async () => {
    const { agent: solo, w } = await soloWorkload("solo", { FAKE_DELAY_MS: "50" }, "solo-wl", "solo");
    await solo.kill9();
    const d = await waitFor(
      async () => {
        const x = await detail(w.id);
        return x.assignments[0].state === "pending" ? x : undefined;
      },
      { what: "the replica no longer ready", timeoutMs: 20_000 },
    );
    expect(d.assignments[0].reason).toContain("offline");
    const started = Date.now();
    const r = await chat(w.slug, "anyone?");
    expect(r.status).toBe(503);
    expect(r.headers.get("retry-after")).toBeTruthy();
    expect((await r.json()).error.message).toContain("offline");
    expect(Date.now() - started).toBeLessThan(5000);
    const sub = await fetch(`${host.url}/endpoint/fleet/${w.slug}/jobs`, {
      method: "POST",
      headers: { authorization: `Bearer ${live}`, "content-type": "application/json" },
      body: JSON.stringify({ kind: "embeddings", body: { input: "later" } }),
    });
    const { job_id } = await sub.json();
    const back = await rerunAgent(host, solo, { FAKE_DELAY_MS: "50" });
    agents[agents.indexOf(solo)] = back;
    await waitFor(
      async () =>
        (
          await (
            await fetch(`${host.url}/endpoint/fleet/${w.slug}/jobs/${job_id}`, {
              headers: { authorization: `Bearer ${live}` },
            })
          ).json()
        ).status === "completed" || undefined,
      { what: "the job run once the worker is back", timeoutMs: 30_000 },
    );
  });
});

describe("a worker lost mid-stream", () => {
  test("kill -9 of the agent while it streams: the client's stream ends cleanly with a worker_lost error event", async () => {
    const { agent: slow, w } = await soloWorkload("slow-streamer", { FAKE_TOKEN_MS: "300" }, "lost-stream", "lost");
    const r = await chat(w.slug, "one two three four five six seven eight", { stream: true, max_tokens: 8 });
    expect(r.status).toBe(200);
    const reader = r.body!.getReader();
    const decoder = new TextDecoder();
    let text = "";
    while (!text.includes('"content":"')) text += decoder.decode((await reader.read()).value, { stream: true });
    await slow.kill9();
    // Read to the end: a reset connection would throw here instead of ending the body.
    for (let next = await reader.read(); !next.done; next = await reader.read())
      text += decoder.decode(next.value, { stream: true });
    const events = text
      .split("\n\n")
      .filter((e) => e.startsWith("data: "))
      .map((e) => e.slice(6));
    expect(events).not.toContain("[DONE]");
    expect(JSON.parse(events.at(-1)!).error).toMatchObject({ code: "worker_lost", type: "server_error" });
    // Run it again so it stops the runtime its killed process left behind.
    agents[agents.indexOf(slow)] = await rerunAgent(host, slow);
  });
});

describe("an agent killed and back before the worker timeout", () => {
  test("a request it had taken and not answered runs again and is answered, not left waiting for good", async () => {
    // A host whose workers count as offline only after 30 s: the agent is back long before.
    const patient = await startHost({}, 30_000);
    try {
      await patient.admin("/admin/projects", { name: "Quick", slug: "quick" });
      const key = (await (await patient.admin("/admin/projects/quick/keys", { name: "k", type: "live" })).json())
        .secret;
      const agent = await joinAgent(patient, "quick-restart", { FAKE_DELAY_MS: "3000" });
      const w = await (
        await patient.admin("/admin/projects/quick/workloads", {
          name: "slow",
          backend: "vllm",
          model_name: "slow",
          config: { command: "vllm serve slow" },
        })
      ).json();
      const ready = await waitFor(
        async () => {
          const d = await (await patient.admin(`/admin/workloads/${w.id}`)).json();
          return d.assignments[0]?.state === "ready" ? d.assignments[0] : undefined;
        },
        { what: "the replica ready", timeoutMs: 30_000 },
      );
      // Bounded by the client, well inside the worker timeout: without the fix it never ends.
      const answer = fetch(`${patient.url}/endpoint/quick/${w.slug}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ messages: [{ role: "user", content: "still there?" }] }),
        signal: AbortSignal.timeout(25_000),
      }).then(
        (r) => r.status,
        (e: Error) => e.name,
      );
      await waitFor(async () => (await stats(ready.base_url)).in_flight > 0 || undefined, {
        what: "the request running on the agent's runtime",
      });
      await agent.kill9();
      const back = await rerunAgent(patient, agent, { FAKE_DELAY_MS: "300" });
      try {
        expect(await answer).toBe(200);
      } finally {
        await back.stop();
      }
    } finally {
      await patient.stop();
    }
  });
});

describe("a runtime lost under a job on a remote worker", () => {
  test("its runtime crashes while it runs a job: the job runs again and completes instead of failing with the agent's 502", async () => {
    const { w } = await soloWorkload("crashy", { FAKE_DELAY_MS: "1500" }, "crash-job", "crashy");
    const base = (await detail(w.id)).assignments[0].base_url;
    const r = await fetch(`${host.url}/endpoint/fleet/${w.slug}/jobs`, {
      method: "POST",
      headers: { authorization: `Bearer ${live}`, "content-type": "application/json" },
      body: JSON.stringify({ kind: "embeddings", body: { input: "survive" } }),
    });
    const { job_id } = await r.json();
    await waitFor(async () => (await stats(base)).in_flight > 0 || undefined, {
      what: "the job running on the runtime",
    });
    await fetch(`${base}/fake/crash`, { method: "POST" }).catch(() => undefined);
    const job = await waitFor(
      async () => {
        const j = await (
          await fetch(`${host.url}/endpoint/fleet/${w.slug}/jobs/${job_id}`, {
            headers: { authorization: `Bearer ${live}` },
          })
        ).json();
        return j.status === "completed" || j.status === "failed" ? j : undefined;
      },
      { what: "the job finished", timeoutMs: 30_000 },
    );
    expect({ status: job.status, error: job.data?.error }).toEqual({ status: "completed", error: undefined });
    expect(job.runs).toBe(2);
  });
});
