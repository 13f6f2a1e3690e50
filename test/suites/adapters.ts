import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { writePeftAdapter } from "../fixtures/adapters";
import { seedProject, startTestServer, type TestServer } from "../helpers/server";
import { waitFor } from "../helpers/proc";
import type { Engine } from "../helpers/postgres";

/**
 * A workload's LoRA adapters on `engine`'s store (issue 39): added through the control plane's and
 * the admin's routes, checked, listed as models on the project's base URL and gone from the list once
 * removed (the data plane's memoised table of adapters follows every write, on PostgreSQL through its
 * change feed). No runtime runs: a workload with no replica yet is offered, as a request would start one.
 */
export function adaptersSuite(engine: Engine): void {
  let s: TestServer;
  let ctx: Awaited<ReturnType<typeof seedProject>>;
  let dir: string;
  let w: { id: string };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "inferd-adapters-"));
    s = await startTestServer({ INFERD_POLICY_MODEL_PATHS: dir }, { engine });
    ctx = await seedProject(s, "Acme", "acme");
    const r = await s.call(`/api/projects/${ctx.project.slug}/workloads`, ctx.sdk, {
      body: { name: "base", backend: "vllm", model_name: "base-7b", config: { command: "vllm serve base-7b" } },
    });
    w = (await r.json()) as { id: string };
  });
  afterAll(async () => {
    await s.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const models = async () =>
    (
      (await (await s.call(`/endpoint/${ctx.project.slug}/v1/models`, ctx.live)).json()) as {
        data: { id: string; parent?: string }[];
      }
    ).data;

  describe(`adapters (${engine})`, () => {
    test("a tenant's key adds one from a path under the operator's model folders; it is checked and listed as a model", async () => {
      const add = await s.call(`/api/workloads/${w.id}/adapters`, ctx.sdk, {
        body: { name: "sql", source: writePeftAdapter(join(dir, "sql"), { base: "org/base-7b", rank: 16 }) },
      });
      expect(add.status).toBe(201);
      const ready = await waitFor(
        async () => {
          const list = (await (await s.call(`/api/workloads/${w.id}/adapters`, ctx.sdk)).json()) as {
            adapters: { name: string; state: string; rank: number; format: string }[];
          };
          return list.adapters.find((a) => a.state === "ready");
        },
        { what: "the adapter checked" },
      );
      expect(ready).toMatchObject({ name: "sql", rank: 16, format: "peft" });
      expect(await models()).toEqual(
        expect.arrayContaining([expect.objectContaining({ id: "sql", parent: "base-7b" })]),
      );
    });

    test("removed, it leaves the list at once", async () => {
      expect((await s.admin(`/admin/workloads/${w.id}/adapters/sql`, { method: "DELETE" })).status).toBe(204);
      expect((await models()).map((m) => m.id)).not.toContain("sql");
      expect((await s.admin(`/admin/workloads/${w.id}/adapters`)).status).toBe(200);
    });
  });
}
