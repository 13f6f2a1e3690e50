/**
 * Cluster mode (issue 21): two `inferd serve` hosts on one real PostgreSQL (started by the test),
 * each with its own data dir and local agent on fake GPUs, the same admin token. Any host answers
 * the control plane and the data plane; one leads; a change on one takes effect on the other; a
 * request arriving at one host is served by a runtime under the other host's agent; jobs submitted
 * anywhere run once and deliver; killing the leader moves the lead and loses no accepted job.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { SQL } from "bun";
import { cleanup, runInferd, tempDir, waitFor } from "./helpers/proc";
import { startServing, type Serving } from "./helpers/serving";
import { stopTestPostgres, testPostgres } from "./helpers/postgres";

const TOKEN = "ik_admin_cluster-test-0123456789abcdef0123456789";
let url: string;
let a: Serving;
let b: Serving;

/** A host of the cluster: its own machine with one fake GPU, its local agent, the shared database and admin token. */
const host = (env: Record<string, string> = {}) =>
  startServing({
    INFERD_DATABASE_URL: url,
    INFERD_ADMIN_TOKEN: TOKEN,
    INFERD_WORKER_TIMEOUT_MS: "4000",
    FAKE_GPUS: "1x NVIDIA L4:23034",
    FAKE_GPU_USAGE_DIR: tempDir("gpu"),
    ...env,
  });

/** `inferd doctor` on the shared database, from a machine of its own (a data dir of its own). */
const doctor = () =>
  runInferd({ args: ["doctor", "--database-url", url, "--port", "0", "--data-dir", tempDir("doctor")] });

/** `/admin/info`'s cluster part as a host sees it. */
const clusterOf = async (s: Serving) =>
  (await (await s.admin("/admin/info")).json()).cluster as {
    mode: string;
    host_id: string;
    leader: { id: string } | null;
    hosts: { id: string; alive: boolean; leading: boolean }[];
  };

beforeAll(async () => {
  url = await (await testPostgres()).createDatabase();
  a = await host();
  b = await host();
});
afterAll(async () => {
  await Promise.all([a, b].map((s) => s?.stop().catch(() => 0)));
  await cleanup();
  await stopTestPostgres();
});

describe("two hosts on one database", () => {
  test("both list both hosts and agree on one leader", async () => {
    const seen = await waitFor(
      async () => {
        const [ia, ib] = [await clusterOf(a), await clusterOf(b)];
        return ia.hosts.filter((h) => h.alive).length === 2 &&
          ib.hosts.filter((h) => h.alive).length === 2 &&
          ia.leader &&
          ia.leader.id === ib.leader?.id
          ? { ia, ib }
          : undefined;
      },
      { what: "two live hosts and one leader", timeoutMs: 20_000 },
    );
    expect(seen.ia.mode).toBe("cluster");
    expect(seen.ia.host_id).not.toBe(seen.ib.host_id);
    expect(seen.ia.hosts.filter((h) => h.leading)).toHaveLength(1);
  });

  test("doctor on the database lists both hosts running and names the leader", async () => {
    const leader = (await clusterOf(a)).leader!.id;
    const r = await doctor();
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^ok {4}hosts +2 running: /m);
    expect(r.stdout).toMatch(new RegExp(`^ok {4}leader +\\S+ \\(${leader}\\) leads since `, "m"));
  });

  test("a project, key and workload made on one host serve on both, from replicas under both hosts' machines", async () => {
    // Both hosts run `startServing`'s project "serving"; make the workload through host a, once both
    // machines are online. Two replicas on one GPU each: one lands on each host's machine.
    await waitFor(
      async () =>
        ((await (await a.admin("/admin/workers")).json()) as { state: string }[]).filter((x) => x.state === "online")
          .length === 2 || undefined,
      { what: "both hosts' machines online" },
    );
    const w = await a.createWorkload({
      name: "chat",
      backend: "vllm",
      model_name: "chat-model",
      config: { command: "vllm serve chat-model" },
      execution_params: { replicas: 2 },
    });
    let last = "";
    const ready = await waitFor(
      async () => {
        const d = await a.workload(w.id);
        last = JSON.stringify({ assignments: d.assignments, scaling: d.scaling, err: d.scheduling_error });
        return d.assignments.length === 2 && d.assignments.every((x) => x.state === "ready") ? d : undefined;
      },
      { what: "two replicas ready", timeoutMs: 60_000, detail: () => last },
    );
    expect(new Set(ready.assignments.map((x) => (x as unknown as { worker_id: string }).worker_id)).size).toBe(2);
    for (const s of [a, b]) {
      // b's own key from startServing authenticates on a and the other way round: one store.
      for (const key of [a.live, b.live]) {
        const r = await waitFor(
          async () => {
            const res = await s.data(w.slug, "/v1/chat/completions", {
              body: { messages: [{ role: "user", content: "hi" }] },
              token: key,
            });
            return res.status === 200 ? res : undefined;
          },
          { what: `a chat answered through ${s.url}`, timeoutMs: 30_000 },
        );
        expect((await r.json()).model).toBe("chat-model");
      }
    }
  });

  test("a key revoked on one host is refused by the other", async () => {
    const made = await (
      await a.admin(`/admin/projects/${a.project}/keys`, { body: { name: "short", type: "live" } })
    ).json();
    const w = (await (await a.admin(`/admin/projects/${a.project}/workloads`)).json())[0];
    const call = () => b.data(w.slug, "/v1/models", { token: made.secret });
    expect((await call()).status).toBe(200);
    expect((await a.admin(`/admin/keys/${made.id}`, { method: "DELETE" })).status).toBe(200);
    await waitFor(async () => (await call()).status === 401 || undefined, { what: "host b refusing the revoked key" });
  });

  test("a job submitted at either host runs once", async () => {
    const w = (await (await a.admin(`/admin/projects/${a.project}/workloads`)).json())[0];
    const ids: string[] = [];
    for (const s of [a, b, a, b]) {
      const r = await s.data(w.slug, "/jobs", {
        body: { kind: "chat", body: { messages: [{ role: "user", content: "job" }] } },
      });
      expect(r.status).toBe(202);
      ids.push((await r.json()).job_id);
    }
    for (const id of ids) {
      const job = await waitFor(
        async () => {
          const j = await (await b.data(w.slug, `/jobs/${id}`)).json();
          return j.status === "completed" ? j : undefined;
        },
        { what: `job ${id} completed`, timeoutMs: 30_000 },
      );
      expect(job.runs).toBe(1);
    }
  });
});

describe("a key's limits hold across the hosts", () => {
  /** A key of the serving project with these limits, and the workload to call. */
  const limitedKey = async (limits: Record<string, number>) => {
    const key = await (
      await a.admin(`/admin/projects/${a.project}/keys`, {
        body: { name: `limited-${Object.keys(limits).join("-")}`, type: "live", limits },
      })
    ).json();
    const w = (await (await a.admin(`/admin/projects/${a.project}/workloads`)).json())[0];
    const chat = (s: Serving) =>
      s.data(w.slug, "/v1/chat/completions", {
        body: { messages: [{ role: "user", content: "count me" }] },
        token: key.secret,
      });
    return { key, chat };
  };

  test("requests per minute: the two hosts together admit the limit, not the limit each", async () => {
    const { chat } = await limitedKey({ rpm: 10 });
    // Eight requests through each host, one host after the other (a minute boundary between them
    // changes nothing: the hosts count the last 60 s).
    const statuses: number[] = [];
    for (let i = 0; i < 8; i++) for (const s of [a, b]) statuses.push((await chat(s)).status);
    expect(statuses.filter((x) => x === 200)).toHaveLength(10);
    expect(statuses.filter((x) => x === 429)).toHaveLength(6);
    const refused = await chat(b);
    expect(refused.status).toBe(429);
    expect((await refused.json()).error.message).toContain("across every host");
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0);
  });

  /** Waits until the shared database holds at least `n` tokens for the key (counted by `table`). */
  const counted = async (keyId: string, table: "rate_windows" | "usage_daily", n: number) => {
    const db = new SQL(url);
    try {
      await waitFor(
        async () => {
          const [r] = await db.unsafe(
            `SELECT COALESCE(SUM(${table === "rate_windows" ? "tokens" : "input_tokens + output_tokens"}), 0) AS n FROM ${table} WHERE key_id = $1`,
            [keyId],
          );
          return Number(r.n) >= n || undefined;
        },
        { what: `${n} tokens of the key counted in ${table}` },
      );
    } finally {
      await db.close();
    }
  };

  test("tokens per minute: once tokens used through one host are counted, the other host refuses the key", async () => {
    const { key, chat } = await limitedKey({ tpm: 1 });
    expect((await chat(a)).status).toBe(200);
    await counted(key.id, "rate_windows", 1);
    // Host b has not seen this key before: its own count is 0, the cluster's is over the limit.
    const r = await chat(b);
    expect(r.status).toBe(429);
    const body = await r.json();
    expect(body.error.code).toBe("rate_limited");
    expect(body.error.message).toContain("across every host");
    expect(r.headers.get("x-ratelimit-remaining-tokens")).toBe("0");
  });

  test("daily token quota: a host the key never used reads what the other host charged", async () => {
    // One chat's tokens, to set a quota that one chat uses up.
    const probe = await limitedKey({ rpm: 1000 });
    const n = (await (await probe.chat(a)).json()).usage.total_tokens as number;
    expect(n).toBeGreaterThan(0);
    const { key, chat } = await limitedKey({ tokens_per_day: n });
    expect((await chat(a)).status).toBe(200);
    await counted(key.id, "usage_daily", n);
    const r = await chat(b);
    expect(r.status).toBe(429);
    expect((await r.json()).error.code).toBe("quota_exceeded");
  });
});

describe("when the database drops the leader's connection", () => {
  test("the lead is taken again (by either host), and only one host leads", async () => {
    const db = new SQL(url);
    /** The database session holding the leader's lock, if one does. */
    const holder = async () =>
      (
        (await db.unsafe(
          `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objid = ${0x696e6c64} AND objsubid = 1 AND granted`,
        )) as { pid: number }[]
      )[0]?.pid;
    try {
      const old = await holder();
      expect(old).toBeDefined();
      // What a database restart or a network cut does to the lock's session.
      await db.unsafe(`SELECT pg_terminate_backend(${old})`);
      const seen = await waitFor(
        async () => {
          const [ia, ib] = [await clusterOf(a), await clusterOf(b)];
          const leading = new Set([ia, ib].flatMap((c) => c.hosts.filter((h) => h.leading).map((h) => h.id)));
          const now = await holder();
          return now !== undefined && now !== old && ia.leader && ia.leader.id === ib.leader?.id && leading.size === 1
            ? ia
            : undefined;
        },
        { what: "one leader again, on a new session holding the lock", timeoutMs: 20_000 },
      );
      expect(seen.leader).not.toBeNull();
    } finally {
      await db.close();
    }
  });
});

describe("when the leader dies", () => {
  test("the other host takes the lead, and accepted jobs still complete", async () => {
    const before = await clusterOf(a);
    const [leader, other] = before.leader!.id === before.host_id ? [a, b] : [b, a];
    const w = (await (await other.admin(`/admin/projects/${other.project}/workloads`)).json())[0];
    await leader.kill9();
    const after = await waitFor(
      async () => {
        const c = await clusterOf(other);
        return c.leader && c.leader.id === c.host_id ? c : undefined;
      },
      { what: "the surviving host leading", timeoutMs: 20_000 },
    );
    expect(after.leader!.id).not.toBe(before.leader!.id);
    // Its heartbeat stops too: it is listed as gone once the host timeout has passed.
    await waitFor(
      async () => (await clusterOf(other)).hosts.find((h) => h.id === before.leader!.id)?.alive === false || undefined,
      { what: "the dead host listed as gone", timeoutMs: 30_000 },
    );
    const checked = await doctor();
    expect(checked.stdout).toMatch(
      new RegExp(`^warn {2}hosts +1 running: .*; not heard from for over 10 s: \\S+ \\(${before.leader!.id}, `, "m"),
    );
    expect(checked.stdout).toMatch(new RegExp(`^ok {4}leader +\\S+ \\(${after.host_id}\\) leads`, "m"));
    const r = await other.data(w.slug, "/jobs", {
      body: { kind: "chat", body: { messages: [{ role: "user", content: "after" }] } },
    });
    expect(r.status).toBe(202);
    const { job_id } = await r.json();
    await waitFor(
      async () => (await (await other.data(w.slug, `/jobs/${job_id}`)).json()).status === "completed" || undefined,
      { what: "the job completed after the leader died", timeoutMs: 60_000 },
    );
  });
});
