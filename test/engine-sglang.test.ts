/**
 * SGLang as it really is (issue 34): its request pool when --max-running-requests is unset (M2),
 * what a pinned version must install (M3), its own /v1/responses (M6), and the `sglang serve`
 * command of recent releases (LOW). The fake SGLang serves /v1/responses from 0.5.0 as SGLang does
 * (test/fixtures/runtime/responses.ts) and answers `sglang serve` (test/fixtures/sglang-bin/sglang).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { sglang } from "../agent/engines/sglang";
import { checkLaunch } from "../agent/launch-policy";
import { fixtureEnv } from "./fixtures";
import { cleanup } from "./helpers/proc";
import { launchContext, tenantPolicy } from "./helpers/launch";
import { startServing, type Serving } from "./helpers/serving";

afterAll(cleanup);

describe("the SGLang descriptor", () => {
  test("capacity: SGLang's own request pool (2048 at least) unless --max-running-requests says", () => {
    const slots = (args: string[]) =>
      sglang.capacity({ args: ["python3", "-m", "sglang.launch_server", ...args], gpus: [], env: {} }).slots;
    expect(slots([])).toBe(2048);
    expect(slots(["--max-running-requests", "64"])).toBe(64);
  });
  test("a pinned version: the server's extra before 0.5.3; the base package with pre-releases allowed after", () => {
    const steps = (version: string) =>
      sglang
        .launch(
          launchContext("sglang", {
            gpuIndices: [0],
            config: { command: "python3 -m sglang.launch_server --model-path m", sglang_version: version },
            which: (c) => (c === "uv" ? "/usr/bin/uv" : null),
          }),
        )
        .prep.flatMap((s) => s.argv ?? []);
    expect(steps("0.5.2")).toContain("sglang[all]==0.5.2");
    expect(steps("0.5.2")).not.toContain("--prerelease=allow");
    expect(steps("0.5.3")).toContain("sglang==0.5.3");
    expect(steps("0.5.3")).toContain("--prerelease=allow");
  });
  test("`sglang serve` is a program tenants may start under the default launch policy", () => {
    const policy = tenantPolicy();
    expect(checkLaunch(policy, "sglang", { command: "sglang serve --model-path org/m" })).toBeNull();
  });
});

describe("SGLang serving through inferd", () => {
  let s: Serving;
  beforeAll(async () => {
    // A long warm-up: a replica called ready while /v1/models already answers would get 503s.
    s = await startServing({ PATH: fixtureEnv({}, { sglang: true }).PATH, FAKE_LOAD_MS: "2000" });
  });
  afterAll(() => s.stop());

  test("`sglang serve` runs, and a Responses request reaches SGLang's own /v1/responses", async () => {
    const w = await s.createWorkload({
      name: "sg",
      backend: "sglang",
      model_name: "org/sg",
      config: { command: "sglang serve --model-path org/sg" },
    });
    const ready = await s.waitState(w.id, "ready", 60_000);
    expect(ready.assignments[0].concurrency).toBe(2048);
    // Ready only after warm-up: the first request is answered.
    const first = await s.data(w.slug, "/v1/chat/completions", {
      body: { model: "org/sg", messages: [{ role: "user", content: "hi" }], max_tokens: 2 },
    });
    expect(first.status).toBe(200);
    const r = await s.data(w.slug, "/v1/responses", {
      body: { model: "org/sg", input: "hello there", max_output_tokens: 4 },
    });
    expect(r.status).toBe(200);
    const body = (await r.json()) as { object: string };
    expect(body.object).toBe("response");
    const paths = s.events((e) => e.event === "request").map((e) => e.path);
    expect(paths).toContain("/v1/responses");
    expect(paths.filter((p) => p === "/v1/chat/completions")).toHaveLength(1); // the first request above only
  });
});
