/**
 * `inferd adapters list|add|rm` (issue 39) against a real `inferd serve` with the fake vLLM: the CLI
 * runs in-process on the server's data dir (it finds the server and the admin token there), adds
 * adapters made on disk as peft saves them, and says the server's refusals in its own words.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { runCli } from "../src/cli";
import { writePeftAdapter } from "./fixtures/adapters";
import { startFakeHub, type FakeHub } from "./fixtures/hf-hub";
import { cleanup, tempDir } from "./helpers/proc";
import { startServing, type Serving } from "./helpers/serving";

let s: Serving;
let hub: FakeHub;
let dir: string;
let base: { id: string; slug: string };

beforeAll(async () => {
  dir = tempDir("adapters-cli");
  const hubbed = writePeftAdapter(join(dir, "hub-carol"), { base: "org/base-7b", rank: 16 });
  const files = ["adapter_config.json", "adapter_model.safetensors"];
  hub = await startFakeHub({
    repos: {
      "org/carol-lora": {
        files: Object.fromEntries(files.map((f) => [f, new Uint8Array(readFileSync(join(hubbed, f)))])),
      },
    },
  });
  s = await startServing({ HF_ENDPOINT: hub.url });
  base = await s.createWorkload({
    name: "base",
    backend: "vllm",
    model_name: "base-7b",
    config: { command: "vllm serve base-7b" },
  });
}, 120_000);

afterAll(async () => {
  await s?.stop();
  await hub?.stop();
  await cleanup();
});

/** Runs the CLI in-process on the server's data dir and collects what it prints. */
async function cli(...args: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runCli(
    ["--data-dir", s.dataDir, ...args],
    {},
    (x) => out.push(x),
    (x) => err.push(x),
  );
  return { code, out: out.join("\n"), err: err.join("\n") };
}

describe("inferd adapters", () => {
  test("add waits until the adapter is checked, list shows it, rm removes it", async () => {
    const empty = await cli("adapters", "list", `${s.project}/${base.slug}`);
    expect(empty).toMatchObject({ code: 0 });
    expect(empty.out).toContain("(no adapters;");

    const path = writePeftAdapter(join(dir, "alice"), { base: "org/base-7b", rank: 8 });
    const added = await cli("adapters", "add", `${s.project}/${base.slug}`, "alice", path);
    expect(added.err).toBe("");
    expect(added.code).toBe(0);
    expect(added.out).toContain(`adapter alice is ready (org/base-7b, rank 8): call it as "model": "alice" on`);
    expect(added.out).toContain(`/endpoint/${s.project}/v1`);

    // By id, and by the bare slug (one workload has it); a table with its columns.
    const listed = await cli("adapters", "list", base.id);
    expect(listed.code).toBe(0);
    const [head, row] = listed.out.split("\n");
    expect(head.split(/\s+/)).toEqual(["name", "state", "base_model", "rank", "size", "source", "reason"]);
    expect(row.split(/\s+/).slice(0, 4)).toEqual(["alice", "ready", "org/base-7b", "8"]);
    expect(row).toContain(path);
    const json = JSON.parse((await cli("adapters", "list", base.slug, "--json")).out);
    expect(json).toEqual([expect.objectContaining({ name: "alice", state: "ready", rank: 8, workload_id: base.id })]);

    const removed = await cli("adapters", "rm", base.id, "alice");
    expect(removed).toMatchObject({ code: 0, out: `removed adapter alice from ${s.project}/${base.slug}` });
    expect((await cli("adapters", "list", base.id)).out).toContain("(no adapters;");

    // From the hub, slowly: add says it is pulling and waits until the files are checked.
    hub.throttle(4096);
    const pulled = await cli("adapters", "add", base.id, "carol", "hf:org/carol-lora");
    hub.throttle(null);
    expect(pulled.err).toBe("pulling hf:org/carol-lora…");
    expect(pulled).toMatchObject({ code: 0 });
    expect(pulled.out).toStartWith("adapter carol is ready (org/base-7b, rank 16)");
  }, 60_000);

  test("an adapter of another base fails with the reason; the server's refusals are its message, exit 1", async () => {
    const wrong = writePeftAdapter(join(dir, "wrong"), { base: "org/other-3b", rank: 8 });
    const failed = await cli("adapters", "add", base.id, "wrong", wrong);
    expect(failed.code).toBe(1);
    expect(failed.err).toContain("inferd: adapter wrong failed:");
    expect(failed.err).toContain("trained on org/other-3b and this workload serves base-7b");
    const rows = (await cli("adapters", "list", base.id)).out.split("\n");
    const row = rows.find((r) => r.startsWith("wrong")) ?? "";
    expect(row).toMatch(/^wrong\s+failed\s/);
    expect(row).toContain("trained on org/other-3b");

    const good = writePeftAdapter(join(dir, "bob"), { base: "org/base-7b", rank: 8 });
    const badName = await cli("adapters", "add", base.id, "no spaces", good);
    expect(badName.code).toBe(1);
    expect(badName.err).toMatch(/^inferd: .*an adapter's name is 1–64 letters/);
    const taken = await cli("adapters", "add", base.id, "base-7b", good);
    expect(taken.code).toBe(1);
    expect(taken.err).toContain('the project already answers to "base-7b"');

    const gone = await cli("adapters", "rm", base.id, "nobody");
    expect(gone.code).toBe(1);
    expect(gone.err).toContain('adapter "nobody"');
    const noWorkload = await cli("adapters", "list", `${s.project}/nothing-here`);
    expect(noWorkload).toMatchObject({ code: 1, err: `inferd: project ${s.project} has no workload "nothing-here"` });

    const ollama = await s.createWorkload({ name: "oll", backend: "ollama", model_name: "llama3.2" });
    const refused = await cli("adapters", "add", ollama.id, "x", good);
    expect(refused.code).toBe(1);
    expect(refused.err).toContain("ADAPTER line in a Modelfile");
  }, 60_000);

  test("wrong usage exits 2 with the usage; no server on the data dir is said plainly", async () => {
    const usage = await cli("adapters", "add", base.id, "only-a-name");
    expect(usage.code).toBe(2);
    expect(usage.err).toContain("usage: inferd adapters list <workload>");
    expect((await cli("adapters", "list", base.id, "--bogus")).err).toContain("unknown flag --bogus");
    expect((await cli("adapters")).code).toBe(2);

    const out: string[] = [];
    const err: string[] = [];
    const idle = tempDir("no-server");
    const code = await runCli(
      ["--data-dir", idle, "adapters", "list", "x"],
      {},
      (x) => out.push(x),
      (x) => err.push(x),
    );
    expect(code).toBe(1);
    expect(err.join("\n")).toContain(`no inferd is running with the data dir ${idle}`);
  });
});
