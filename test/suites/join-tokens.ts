import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { eq } from "drizzle-orm";
import { openPgStore, openStore, type Store } from "../../src/db";
import { joinTokens } from "../../src/db/schema";
import { cleanup, tempDir, waitFor } from "../helpers/proc";
import { joinAgent, spawnAgent, startHost, type Host } from "../helpers/agents";
import { storeEnv, type Engine } from "../helpers/postgres";
import { join } from "node:path";

/** A pool join token as `POST /admin/workers/join-tokens` answers it. */
interface MadeToken {
  id: string;
  token: string;
  reusable: boolean;
  state: string;
  expires_at: string;
  join_command: string;
}

/**
 * Pool join tokens through a real host and real `inferd agent` processes over HTTPS: a reusable
 * token lets several agents join (each a new worker named after its machine, which can host
 * replicas), a restarted agent keeps its worker, and expired, revoked, used and unknown tokens are
 * refused with 401 `invalid_join_token`; no secret is listed or logged.
 */
export function joinTokensSuite(engine: Engine): void {
  let host: Host;
  let store: Store;
  let version = "";
  let live = "";
  const agents: ReturnType<typeof spawnAgent>[] = [];
  const stops: (() => Promise<unknown>)[] = [];
  const secrets: string[] = [];

  beforeAll(async () => {
    host = await startHost(await storeEnv(engine));
    // The test's own handle on the host's store, to move a token's expiry into the past.
    store = host.storeEnv.INFERD_DATABASE_URL
      ? await openPgStore(host.storeEnv.INFERD_DATABASE_URL, 2)
      : openStore(join(host.dataDir, "inferd.db"));
    version = (await (await fetch(`${host.url}/healthz`)).json()).version;
    // On PostgreSQL the leader places replicas: wait until this one host leads.
    await waitFor(async () => (await (await host.admin("/admin/info")).json()).cluster?.leader || undefined, {
      what: "the host leading",
      timeoutMs: 30_000,
    });
    await host.admin("/admin/projects", { name: "Pool", slug: "pool" });
    live = (await (await host.admin("/admin/projects/pool/keys", { name: "k", type: "live" })).json()).secret;
  });
  afterAll(async () => {
    for (const a of agents) a.proc.kill("SIGTERM");
    await Promise.all([...agents.map((a) => a.proc.exited), ...stops.map((stop) => stop().catch(() => 0))]);
    await store?.close();
    await host?.stop();
    await cleanup();
  });

  const make = async (body: Record<string, unknown>): Promise<MadeToken> => {
    const r = await host.admin("/admin/workers/join-tokens", body);
    expect(r.status).toBe(201);
    const made = (await r.json()) as MadeToken;
    secrets.push(made.token.split(".")[1]);
    return made;
  };
  const joinUrlOf = (made: MadeToken) => made.join_command.split(" ")[3];
  /** A join as an agent sends it, straight to the host's HTTPS port. */
  const joinCall = async (made: MadeToken, token = made.token, hostname = "direct-box") => {
    const r = await fetch(`${joinUrlOf(made)}/agent/v1/join`, {
      method: "POST",
      body: JSON.stringify({
        token,
        version,
        machine: {
          hostname,
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
    return { status: r.status, body: await r.json() };
  };
  const workers = async () =>
    (await (await host.admin("/admin/workers")).json()) as {
      id: string;
      name: string;
      kind: string;
      state: string;
      hostname: string;
    }[];
  const listed = async () =>
    (await (await host.admin("/admin/workers/join-tokens")).json()) as (MadeToken & { uses: number })[];
  const online = (dataDir: string, proc: ReturnType<typeof spawnAgent>) =>
    waitFor(
      async () => {
        if (proc.proc.exitCode !== null) throw new Error(`agent exited ${proc.proc.exitCode}: ${proc.output()}`);
        const id = /running as worker (wk_\w+)/.exec(proc.output())?.[1];
        return id ? (await workers()).find((w) => w.id === id && w.state === "online") : undefined;
      },
      { what: `agent of ${dataDir} online`, timeoutMs: 30_000, detail: proc.output },
    );

  describe("a reusable pool token", () => {
    let pool: MadeToken;
    let first: { dir: string; worker: { id: string; name: string } };
    let second: { dir: string; worker: { id: string; name: string } };

    test("is made with its id, expiry and join command; it pins the same certificate as a worker's token", async () => {
      const before = Date.now();
      pool = await make({ reusable: true });
      // (a copy: bun's toMatchObject writes the matchers into the object it checks)
      expect({ ...pool }).toMatchObject({ id: expect.stringMatching(/^jt_/), reusable: true, state: "active" });
      expect(pool.token).toMatch(/^jt_[a-z2-7]{20}\.[A-Za-z0-9_-]{43}\.[0-9a-f]{64}$/);
      expect(pool.token.startsWith(`${pool.id}.`)).toBe(true);
      expect(pool.join_command).toBe(`inferd agent join ${joinUrlOf(pool)} --token ${pool.token}`);
      // 24 hours unless asked.
      const ttl = Date.parse(pool.expires_at) - before;
      expect(ttl).toBeGreaterThan(86_400_000 - 60_000);
      expect(ttl).toBeLessThan(86_400_000 + 60_000);
      const worker = await (await host.admin("/admin/workers", { name: "pin-compare" })).json();
      expect(pool.token.split(".")[2]).toBe(worker.join_token.split(".")[2]);
      await host.admin(`/admin/workers/${worker.id}`, undefined, "DELETE");
    });

    test("lets two agents join, each as a new online worker named after its machine", async () => {
      // The first as a DaemonSet runs it: plain `inferd agent`, told where and how in its environment.
      const dirA = tempDir("pool-a");
      const a = spawnAgent([], dirA, { INFERD_JOIN_URL: joinUrlOf(pool), INFERD_JOIN_TOKEN: pool.token });
      agents.push(a);
      const wa = await online(dirA, a);
      // The second with the join command as printed.
      const dirB = tempDir("pool-b");
      const b = spawnAgent(["join", joinUrlOf(pool), "--token", pool.token], dirB);
      agents.push(b);
      const wb = await online(dirB, b);
      expect(wa.id).not.toBe(wb.id);
      expect(wa.kind).toBe("remote");
      expect(wb.kind).toBe("remote");
      // Both run on this machine: one has its host name, the other the same with a suffix.
      expect(wa.name).toBe(wa.hostname.replace(/[^A-Za-z0-9._-]/g, "-"));
      expect(wb.name.startsWith(`${wa.name}-`)).toBe(true);
      const t = (await listed()).find((x) => x.id === pool.id)!;
      expect(t).toMatchObject({ state: "active", uses: 2 });
      first = { dir: dirA, worker: wa };
      second = { dir: dirB, worker: wb };
    });

    test("a workload pinned (by name) to a pool-joined worker is served by it, its replica kept across placement passes", async () => {
      let last: unknown;
      const w = await (
        await host.admin("/admin/projects/pool/workloads", {
          name: "pooled",
          backend: "vllm",
          model_name: "pooled",
          worker_id: first.worker.name,
          config: { command: "vllm serve pooled" },
        })
      ).json();
      const d = await waitFor(
        async () => {
          const x = (last = await (await host.admin(`/admin/workloads/${w.id}`)).json());
          return x.assignments?.[0]?.state === "ready" ? x : undefined;
        },
        { what: "the replica ready on the pool-joined worker", timeoutMs: 30_000, detail: () => JSON.stringify(last) },
      );
      expect(d.assignments.map((a: { worker_id: string }) => a.worker_id)).toEqual([first.worker.id]);
      const r = await fetch(`${host.url}/endpoint/pool/${w.slug}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${live}`, "content-type": "application/json" },
        body: JSON.stringify({ messages: [{ role: "user", content: "hello pool" }] }),
      });
      expect(r.status).toBe(200);
      expect((await r.json()).choices[0].message.content).toBeTruthy();
      const stats = await (await fetch(`${d.assignments[0].base_url}/fake/stats`)).json();
      expect(stats.total).toBeGreaterThanOrEqual(1);
      // An edit runs a placement pass: the replica pinned by name stays (it was recreated on each pass).
      await host.admin(`/admin/workloads/${w.id}`, { description: "edited" }, "PATCH");
      await host.admin(`/admin/workloads/${w.id}`, { description: "edited again" }, "PATCH");
      expect(
        (await (await host.admin(`/admin/workloads/${w.id}`)).json()).assignments.map((a: { id: string }) => a.id),
      ).toEqual([d.assignments[0].id]);
    });

    test("an agent restarted on its data dir comes back as the same worker (it does not join again)", async () => {
      const a = agents[0];
      a.proc.kill("SIGTERM");
      await a.proc.exited;
      const again = spawnAgent([], first.dir, { INFERD_JOIN_URL: joinUrlOf(pool), INFERD_JOIN_TOKEN: pool.token });
      agents[0] = again;
      const w = await online(first.dir, again);
      expect(w.id).toBe(first.worker.id);
      expect(again.output()).not.toContain("joined ");
      expect((await listed()).find((x) => x.id === pool.id)!.uses).toBe(2);
    });

    test("a worker joined with a pool token can host a member of a multi-node group", async () => {
      // The second pool agent restarts with a cluster address; a third worker joins with its own one-time token.
      agents[1].proc.kill("SIGTERM");
      await agents[1].proc.exited;
      agents[1] = spawnAgent([], second.dir, { INFERD_CLUSTER_ADDRESS: "127.0.0.1" });
      expect((await online(second.dir, agents[1])).id).toBe(second.worker.id);
      const third = await joinAgent(host, "gpu-third", { INFERD_CLUSTER_ADDRESS: "127.0.0.1" });
      stops.push(() => third.stop());
      const w = await (
        await host.admin("/admin/projects/pool/workloads", {
          name: "grouped",
          backend: "vllm",
          model_name: "grouped",
          nodes: 2,
          config: { command: "vllm serve grouped" },
        })
      ).json();
      let seen = "";
      const d = await waitFor(
        async () => {
          const x = await (await host.admin(`/admin/workloads/${w.id}`)).json();
          seen = JSON.stringify({ error: x.scheduling_error, members: x.assignments });
          return x.assignments.length === 2 && x.assignments.every((a: { state: string }) => a.state === "ready")
            ? x
            : undefined;
        },
        { what: "both members of the group ready", timeoutMs: 60_000, detail: () => seen },
      );
      expect(d.assignments.map((a: { worker_id: string }) => a.worker_id).sort()).toEqual(
        [second.worker.id, third.workerId].sort(),
      );
      const r = await fetch(`${host.url}/endpoint/pool/${w.slug}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${live}`, "content-type": "application/json" },
        body: JSON.stringify({ messages: [{ role: "user", content: "hello group" }] }),
      });
      expect(r.status).toBe(200);
      await host.admin(`/admin/workloads/${w.id}`, undefined, "DELETE");
    });
  });

  describe("refusals", () => {
    test("a one-time pool token lets exactly one agent in, also when two ask at once", async () => {
      const once = await make({ reusable: false, expires_in_s: 600 });
      expect(once.reusable).toBe(false);
      const both = await Promise.all([joinCall(once, once.token, "race-a"), joinCall(once, once.token, "race-b")]);
      expect(both.map((r) => r.status).sort()).toEqual([201, 401]);
      const refused = both.find((r) => r.status === 401)!;
      expect(refused.body.error).toMatchObject({
        code: "invalid_join_token",
        message: expect.stringContaining("already used"),
      });
      expect((await joinCall(once)).status).toBe(401);
      expect((await listed()).find((x) => x.id === once.id)).toMatchObject({ state: "used", uses: 1 });
    });

    test("an expired token is refused with 401, and the agent says why", async () => {
      const old = await make({ reusable: true, expires_in_s: 60 });
      // Time passes: the token's expiry is moved into the past in the store.
      await store.db
        .update(joinTokens)
        .set({ expiresAt: new Date(Date.now() - 1000).toISOString() })
        .where(eq(joinTokens.id, old.id));
      const r = await joinCall(old);
      expect(r.status).toBe(401);
      expect(r.body.error).toMatchObject({
        code: "invalid_join_token",
        message: expect.stringContaining("expired at"),
      });
      const dir = tempDir("pool-expired");
      const agent = spawnAgent(["join", joinUrlOf(old), "--token", old.token], dir);
      expect(await agent.proc.exited).not.toBe(0);
      expect(agent.output()).toContain("expired at");
      expect((await listed()).find((x) => x.id === old.id)).toMatchObject({ state: "expired", uses: 0 });
    });

    test("a revoked token is refused; revoking leaves the workers that joined with it alone", async () => {
      const t = await make({ reusable: true, expires_in_s: 3600 });
      const joined = await joinCall(t, t.token, "before-revoke");
      expect(joined.status).toBe(201);
      const del = await host.admin(`/admin/workers/join-tokens/${t.id}`, undefined, "DELETE");
      expect(del.status).toBe(200);
      expect(await del.json()).toMatchObject({ id: t.id, state: "revoked", revoked_at: expect.any(String) });
      const r = await joinCall(t, t.token, "after-revoke");
      expect(r.status).toBe(401);
      expect(r.body.error).toMatchObject({ code: "invalid_join_token", message: expect.stringContaining("revoked") });
      expect((await workers()).some((w) => w.id === joined.body.worker_id)).toBe(true);
      expect((await host.admin("/admin/workers/join-tokens/jt_nosuchtoken", undefined, "DELETE")).status).toBe(404);
    });

    test("a token with a wrong secret, an unknown id or a forged form is refused with 401", async () => {
      const t = await make({ reusable: true });
      const [id, secret, pin] = t.token.split(".");
      for (const bad of [
        `${id}.${secret.slice(0, -2)}xx.${pin}`,
        `jt_aaaaaaaaaaaaaaaaaaaa.${secret}.${pin}`,
        `${id}.${secret}`,
      ]) {
        const r = await joinCall(t, bad);
        expect(r.status).toBe(401);
        expect(r.body.error.code).toBe("invalid_join_token");
      }
    });

    test("bad requests name the field", async () => {
      for (const body of [
        { expires_in_s: 10 },
        { expires_in_s: 400 * 86_400 },
        { expires_in_s: 1.5 },
        { reusable: "yes" },
        { name: "x" },
      ]) {
        const r = await host.admin("/admin/workers/join-tokens", body);
        expect(r.status).toBe(400);
        expect((await r.json()).error.code).toBe("validation_error");
      }
      expect((await fetch(`${host.url}/admin/workers/join-tokens`)).status).toBe(401);
      // The API reference lists the routes.
      const doc = await (await fetch(`${host.url}/docs/json`)).json();
      expect(Object.keys(doc.paths)).toEqual(
        expect.arrayContaining(["/admin/workers/join-tokens", "/admin/workers/join-tokens/{id}"]),
      );
    });
  });

  test("the list and the audit log never show a token's secret", async () => {
    const text = await (await host.admin("/admin/workers/join-tokens")).text();
    const list = JSON.parse(text) as Record<string, unknown>[];
    expect(list.length).toBeGreaterThanOrEqual(5);
    for (const t of list)
      expect(Object.keys(t).sort()).toEqual([
        "created_at",
        "expires_at",
        "id",
        "last_used_at",
        "reusable",
        "revoked_at",
        "state",
        "uses",
      ]);
    const audit = await (await host.admin("/admin/audit?limit=1000")).text();
    expect(JSON.parse(audit).entries.some((e: { action: string }) => e.action === "join_token.create")).toBe(true);
    expect(JSON.parse(audit).entries.some((e: { action: string }) => e.action === "join_token.revoke")).toBe(true);
    expect(
      JSON.parse(audit).entries.some(
        (e: { action: string; diff: { join_token_id?: string } }) =>
          e.action === "worker.create" && e.diff.join_token_id,
      ),
    ).toBe(true);
    for (const s of secrets) {
      expect(text).not.toContain(s);
      expect(audit).not.toContain(s);
      expect(host.output()).not.toContain(s);
    }
  });
}
