/**
 * Models in cluster mode (issue 21): the model records are shared, the files are each host's own
 * (its data dir). A model pulled through one host is listed by every host; a replica placed on
 * another host's machine gets the model fetched into that machine's store before its runtime starts,
 * from the (fake) Hugging Face hub both hosts use.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { startFakeHub, type FakeHub } from "./fixtures/hf-hub";
import { safetensorsRepo } from "./fixtures/hf-repos";
import { stopTestPostgres, testPostgres } from "./helpers/postgres";
import { cleanup, tempDir, waitFor } from "./helpers/proc";
import { startServing, type Serving } from "./helpers/serving";

const TOKEN = "ik_admin_cluster-models-0123456789abcdef01234567";
const REPO = "tiny-org/tiny-chat";
let hub: FakeHub;
let a: Serving;
let b: Serving;

/** The snapshot of REPO in a host's own model store, if it is there. */
const snapshotIn = (s: Serving) => {
  const dir = join(s.dataDir, "models", "hf", "hub", `models--${REPO.replace("/", "--")}`, "snapshots");
  return existsSync(dir) ? readdirSync(dir) : [];
};

beforeAll(async () => {
  hub = await startFakeHub({ repos: { [REPO]: safetensorsRepo(tempDir("hf-src")) } });
  const url = await (await testPostgres()).createDatabase();
  // Pulls allowed (no HF_HUB_OFFLINE), from the fake hub; one GPU per host's machine.
  const host = () =>
    startServing({
      INFERD_DATABASE_URL: url,
      INFERD_ADMIN_TOKEN: TOKEN,
      HF_HUB_OFFLINE: undefined as unknown as string,
      HF_ENDPOINT: hub.url,
      FAKE_GPUS: "1x NVIDIA L4:23034",
      FAKE_GPU_USAGE_DIR: tempDir("gpu"),
    });
  a = await host();
  b = await host();
});
afterAll(async () => {
  await Promise.all([a, b].map((s) => s?.stop().catch(() => 0)));
  await hub?.stop();
  await cleanup();
  await stopTestPostgres();
});

test("a model pulled through one host is listed by both, and fetched into the other host's store for its replica", async () => {
  const made = await a.admin("/admin/models", { body: { source: `hf:${REPO}` } });
  const pulled = await made.json();
  expect([200, 202], JSON.stringify(pulled)).toContain(made.status);
  let model = "";
  await waitFor(
    async () =>
      (model = JSON.stringify(await (await a.admin(`/admin/models/${pulled.id}`)).json())).includes(
        '"state":"ready"',
      ) || undefined,
    { what: "the model ready on host a", timeoutMs: 30_000, detail: () => model },
  );
  expect(snapshotIn(a)).toHaveLength(1);
  expect(snapshotIn(b)).toHaveLength(0);
  const listed = (await (await b.admin("/admin/models")).json()) as { id: string; state: string }[];
  expect(listed.find((m) => m.id === pulled.id)?.state).toBe("ready");

  await waitFor(
    async () =>
      ((await (await a.admin("/admin/workers")).json()) as { state: string }[]).filter((w) => w.state === "online")
        .length === 2 || undefined,
    { what: "both hosts' machines online" },
  );
  const w = await a.createWorkload({
    name: "tiny",
    backend: "vllm",
    model_name: REPO,
    config: { command: `vllm serve ${REPO}` },
    execution_params: { replicas: 2 },
  });
  let last = "";
  await waitFor(
    async () => {
      const d = await a.workload(w.id);
      last = JSON.stringify(d.assignments.map((x) => ({ state: x.state, reason: x.reason })));
      return d.assignments.length === 2 && d.assignments.every((x) => x.state === "ready") ? d : undefined;
    },
    {
      what: "a replica ready on each host's machine",
      timeoutMs: 60_000,
      detail: () => `${last}\n--- b ---\n${b.output().slice(-3000)}`,
    },
  );
  // Host b's machine has its own copy now, the same snapshot.
  expect(snapshotIn(b)).toEqual(snapshotIn(a));
  const r = await b.data(w.slug, "/v1/chat/completions", { body: { messages: [{ role: "user", content: "hi" }] } });
  expect(r.status).toBe(200);
});
