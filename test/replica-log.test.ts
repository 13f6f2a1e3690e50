import { afterAll, describe, expect, test } from "bun:test";
import { Replica, type ReplicaHost } from "../agent/replica";
import { LogRing } from "../agent/ring";
import type { ReplicaReport, ReplicaSpec } from "../agent/protocol";
import { cleanup, tempDir, waitFor } from "./helpers/proc";

/** A replica's own notes in its log: why a launch failed, and each crash restart, without repeating the runtime's output. */
afterAll(cleanup);

/** A replica of a vLLM workload running `command`, with a host that records its reports. */
function replicaOf(command: string) {
  const reports: ReplicaReport[] = [];
  const host: ReplicaHost = {
    dataDir: tempDir("replica-log"),
    env: { PATH: process.env.PATH },
    which: (cmd) => Bun.which(cmd),
    freePort: async () => 1,
    builtinLlama: () => ({ argv: [], env: {} }),
    ensureDaemon: async () => {},
    report: (r) => reports.push(r),
    supervisor: { restart: { baseMs: 10, maxMs: 10, maxCrashes: 1, windowMs: 60_000 } },
    pullModel: async () => {
      throw new Error("no hub in this test");
    },
  };
  const spec: ReplicaSpec = {
    assignment_id: "asg_test",
    workload: {
      id: "wl_test",
      slug: "w",
      project_slug: "p",
      backend: "vllm",
      model_name: "m",
      task_type: "text2text",
      config: { command },
    },
    concurrency: 1,
    gpus: 0,
    gpu_indices: [],
    revision: "1",
  };
  const ring = new LogRing();
  return { replica: new Replica(spec, ring, host), ring, reports };
}

const failed = (reports: ReplicaReport[]) => reports.find((r) => r.state === "failed");

describe("a replica's log", () => {
  test("a program that is not there: the log says so (red), as the failed report does", async () => {
    const { replica, ring, reports } = replicaOf("/nonexistent/dir/vllm serve m");
    await replica.start();
    const report = await waitFor(() => failed(reports), { what: "failed" });
    expect(report.reason).toBe("command not found: /nonexistent/dir/vllm");
    expect(ring.text()).toBe("\x1b[1;31m[inferd] failed: command not found: /nonexistent/dir/vllm\x1b[0m\r\n");
    await replica.stop();
  });

  test("a runtime that keeps crashing: each restart and the final failure are noted once, its output not repeated", async () => {
    const { replica, ring, reports } = replicaOf(`sh -c "echo boom; exit 3"`);
    await replica.start();
    const report = await waitFor(() => failed(reports), { what: "failed" });
    expect(report.reason).toContain("--- last output ---\nboom");
    const text = ring.text().replace(/\x1b\[[\d;]*m/g, "");
    expect(text.match(/boom/g)).toHaveLength(2);
    expect(text).toContain("[inferd] sh exited with code 3; restarting in 10 ms\r\n");
    expect(text).toMatch(/\[inferd\] failed: sh exited with code 3; it crashed 2 times within 60 s, giving up\r\n$/);
    await replica.stop();
  });
});
