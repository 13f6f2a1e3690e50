/**
 * Remote agents in cluster mode (issue 21): two hosts on one real PostgreSQL without local agents,
 * one `inferd agent` on fake GPUs. The hosts serve one certificate, so a join command made on one
 * host works against the other; the agent learns every host when it joins and takes work from each;
 * when the host it joined dies, the other host keeps being served, and the agent starts again from
 * its saved state while that host is still down.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { joinAgentAt, rerunAgent, startHost, type AgentProc, type Host } from "./helpers/agents";
import { cleanup, waitFor } from "./helpers/proc";
import { stopTestPostgres, testPostgres } from "./helpers/postgres";

const TOKEN = "ik_admin_cluster-agents-0123456789abcdef01234567";
let a: Host;
let b: Host;
let agent: AgentProc;
let live: string;
let slug: string;

/** The HTTPS address a host tells agents to join. */
const joinUrlOf = (h: Host) => /agents join at (https:\/\/\S+)/.exec(h.output())![1];
/** A chat through `h` for the cluster's one workload; the response. */
const chat = (h: Host) =>
  fetch(`${h.url}/endpoint/team/${slug}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${live}`, "content-type": "application/json" },
    body: JSON.stringify({ messages: [{ role: "user", content: "hi" }] }),
  });

beforeAll(async () => {
  const url = await (await testPostgres()).createDatabase();
  const env = { INFERD_DATABASE_URL: url, INFERD_ADMIN_TOKEN: TOKEN };
  a = await startHost(env, 3000);
  b = await startHost(env, 3000);
});
afterAll(async () => {
  await agent?.stop().catch(() => 0);
  await Promise.all([a, b].map((h) => h?.stop().catch(() => 0)));
  await cleanup();
  await stopTestPostgres();
});

describe("one agent, two hosts", () => {
  test("the hosts serve one certificate: a join command made on one host joins through the other", async () => {
    const [ia, ib] = [await (await a.admin("/admin/info")).json(), await (await b.admin("/admin/info")).json()];
    const fingerprints = new Set(
      [...ia.cluster.hosts, ...ib.cluster.hosts].map((h: { fingerprint: string }) => h.fingerprint),
    );
    expect(fingerprints.size).toBe(1);
    // The worker (and its one-time token, pinning the cluster's certificate) is made on host a; the agent joins host b.
    agent = await joinAgentAt(a, "gpu-box", joinUrlOf(b));
    const seen = async (h: Host) =>
      ((await (await h.admin("/admin/workers")).json()) as { id: string; state: string }[]).find(
        (w) => w.id === agent.workerId,
      )?.state;
    expect(await seen(a)).toBe("online");
    expect(await seen(b)).toBe("online");
  });

  test("a workload made on one host is served through both, by the agent's runtime", async () => {
    await a.admin("/admin/projects", { name: "Team", slug: "team" });
    live = (await (await b.admin("/admin/projects/team/keys", { name: "live", type: "live" })).json()).secret;
    const w = await (
      await a.admin("/admin/projects/team/workloads", {
        name: "chat",
        backend: "vllm",
        model_name: "chat-model",
        config: { command: "vllm serve chat-model" },
      })
    ).json();
    slug = w.slug;
    for (const h of [a, b]) {
      const r = await waitFor(
        async () => {
          const res = await chat(h);
          return res.status === 200 ? res : undefined;
        },
        { what: `a chat answered through ${h.url}`, timeoutMs: 60_000, detail: () => agent.output() },
      );
      expect((await r.json()).model).toBe("chat-model");
    }
  });

  test("when the host the agent joined dies, the other host is still served, and the agent restarts from its saved state", async () => {
    await b.kill9();
    // Requests through host a: served by the agent's runtime through its link to a (a may first
    // take the lead and place the workload again).
    await waitFor(async () => (await chat(a)).status === 200 || undefined, {
      what: "host a serving after host b died",
      timeoutMs: 60_000,
      detail: () => agent.output(),
    });
    // The agent restarts (a reboot) while the host it joined is still down: it reaches the cluster through host a.
    await agent.kill9();
    agent = await rerunAgent(a, agent);
    await waitFor(async () => (await chat(a)).status === 200 || undefined, {
      what: "host a serving through the restarted agent",
      timeoutMs: 60_000,
      detail: () => agent.output(),
    });
  });
});
