import { afterAll, describe, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Subprocess } from "bun";
import { cleanup, runInferd, sourceBin, startInferd, tempDir, waitFor } from "./helpers/proc";
import { joinAgent, spawnAgent, startHost } from "./helpers/agents";

/**
 * The data dir lock is a kernel file lock: it ends with its process, even a `kill -9`ed one its
 * parent never reaps (a zombie), while a live holder is refused with its pid and URL.
 */
const parents: Subprocess[] = [];
afterAll(async () => {
  for (const p of parents) p.kill("SIGKILL");
  await Promise.all(parents.map((p) => p.exited));
  await cleanup();
});

/** The state letter of a process in /proc (R, S, Z…), or null once it is gone. */
function procState(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2)[0];
  } catch {
    return null;
  }
}

const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

describe("data dir lock", () => {
  test("a kill -9ed inferd that its parent never reaps (a zombie) does not keep the data dir", async () => {
    const dataDir = tempDir("zombie");
    const serve = [...sourceBin(), "serve", "--port", "0", "--data-dir", dataDir].map(quote).join(" ");
    const env: Record<string, string> = { INFERD_LOCAL_AGENT: "0" };
    for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !k.startsWith("INFERD_")) env[k] ??= v;
    // bash starts inferd in the background, prints its pid, then becomes `sleep`, which never reaps it.
    const parent = Bun.spawn(["bash", "-c", `${serve} & echo "child pid $!"; exec sleep 600`], {
      env,
      stdin: "ignore",
      stdout: "pipe",
      stderr: "pipe",
    });
    parents.push(parent);
    let output = "";
    const pump = async (s: ReadableStream<Uint8Array>) => {
      for await (const chunk of s) output += new TextDecoder().decode(chunk);
    };
    void pump(parent.stdout);
    void pump(parent.stderr);
    const pid = Number(
      await waitFor(() => /child pid (\d+)/.exec(output)?.[1], { what: "the child's pid", detail: () => output }),
    );
    await waitFor(() => output.includes("listening on"), {
      what: "the first inferd listening",
      timeoutMs: 30_000,
      detail: () => output,
    });

    process.kill(pid, "SIGKILL");
    await waitFor(() => procState(pid) === "Z", {
      what: `inferd ${pid} a zombie`,
      detail: () => `state ${procState(pid)}`,
    });
    expect(() => process.kill(pid, 0)).not.toThrow(); // a pid file check would still see it "alive"

    const second = await startInferd({ dataDir });
    expect(await (await fetch(`${second.url}/healthz`)).status).toBe(200);
    expect(procState(pid)).toBe("Z");

    const refused = await runInferd({ args: ["serve", "--port", "0", "--data-dir", dataDir] });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(
      `another inferd (pid ${second.proc.pid}, ${second.url}) is already serving the data dir ${dataDir}`,
    );
    expect(refused.stderr).not.toContain("    at ");
    expect(await second.stop()).toBe(0);
  });

  test("the previous version's inferd.lock (JSON) is refused while its pid runs and replaced once it is gone", async () => {
    const dataDir = tempDir("oldlock");
    const holder = Bun.spawn(["sleep", "600"]);
    parents.push(holder);
    writeFileSync(
      join(dataDir, "inferd.lock"),
      JSON.stringify({ pid: holder.pid, start: null, info: "http://127.0.0.1:1" }),
    );
    const refused = await runInferd({ args: ["serve", "--port", "0", "--data-dir", dataDir] });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(`pid ${holder.pid}, http://127.0.0.1:1`);
    holder.kill("SIGKILL");
    await holder.exited;
    const srv = await startInferd({ dataDir });
    expect(readFileSync(join(dataDir, "inferd.lock"), "utf8")).not.toContain(String(holder.pid));
    expect(JSON.parse(readFileSync(join(dataDir, "inferd.pid"), "utf8"))).toMatchObject({
      pid: srv.proc.pid,
      info: srv.url,
    });
    expect((await fetch(`${srv.url}/healthz`)).status).toBe(200); // past start: its SIGTERM handler is in place
    expect(await srv.stop()).toBe(0);
  });

  test("one agent per data dir: a second `inferd agent` on it is refused, naming the first", async () => {
    const host = await startHost();
    const agent = await joinAgent(host, "only");
    const second = spawnAgent([], agent.dataDir);
    expect(await second.proc.exited).toBe(1);
    await waitFor(() => second.output().includes(`another inferd (pid ${agent.proc.pid}, agent for `), {
      what: "the refusal naming the first agent",
      detail: second.output,
    });
    expect(await agent.stop()).toBe(0);
    await host.stop();
  });
});
