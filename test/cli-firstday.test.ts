/**
 * The command line on the first day: `inferd desktop` on a machine without a display says why (the
 * browser's own words) and exits 1 instead of hanging; `doctor` checks the ports this data dir's
 * server really listens on; `model show` is a table a person reads (`--json` for programs); a
 * missing `--type` and an unknown flag are named as such. Real processes, real Chromium.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { writeTinyGguf } from "./fixtures/gguf";
import { cleanup, runInferd, startInferd, tempDir, waitFor } from "./helpers/proc";

afterAll(cleanup);

/** The environment of a Linux session with no graphical display (neither X11 nor Wayland). */
const headless = (extra: Record<string, string>) => ({ DISPLAY: "", WAYLAND_DISPLAY: "", ...extra });

describe("inferd desktop without a display", () => {
  test("prints Chromium's own error, stops the server it started and exits 1", async () => {
    const dataDir = tempDir("desktop-headless");
    const r = await runInferd({
      args: ["desktop", "--port", "0", "--data-dir", dataDir],
      env: headless({
        INFERD_BROWSER: "/usr/bin/chromium",
        INFERD_BROWSER_ARGS: `--no-sandbox --no-first-run --user-data-dir=${tempDir("desktop-profile")}`,
      }),
      timeoutMs: 60_000,
    });
    expect(r.code).toBe(1);
    expect(r.stdout).toContain("opening the dashboard: /usr/bin/chromium");
    expect(r.stderr).toContain("inferd desktop: /usr/bin/chromium exited with code");
    expect(r.stderr).toContain("DISPLAY and WAYLAND_DISPLAY are unset");
    expect(r.stderr).toContain("Missing X server or $DISPLAY"); // Chromium's own line
    expect(r.stderr).toMatch(/open http:\/\/127\.0\.0\.1:\d+\/ in a browser on a machine with a display/);
    expect(r.stdout).not.toContain("the window was closed");
  }, 90_000);

  test("a browser that cannot be started is named, with exit 1", async () => {
    const r = await runInferd({
      args: ["desktop", "--port", "0", "--data-dir", tempDir("desktop-nobrowser")],
      env: headless({ INFERD_BROWSER: "/nonexistent/browser" }),
      timeoutMs: 60_000,
    });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("cannot start /nonexistent/browser");
  }, 90_000);
});

describe("inferd doctor on a data dir with a running server", () => {
  test("checks the ports the server really took (started with --port 0), not the default 8420", async () => {
    const srv = await startInferd();
    try {
      const port = new URL(srv.url).port;
      // The line after "listening on" may reach the pipe a moment later: wait for it.
      const tlsPort = (
        await waitFor(async () => /agents join at https:\/\/[^:]+:(\d+)/.exec(srv.output()) ?? undefined, {
          what: "the agents' join line",
        })
      )[1];
      // No --port given to doctor: it would otherwise look at 8420 and 8421.
      const r = await runInferd({ args: ["doctor", "--data-dir", srv.dataDir] });
      expect(r.stdout).toMatch(
        new RegExp(
          `^ok {4}http port +127\\.0\\.0\\.1:${port} is held by this data dir's server \\(pid ${srv.proc.pid}`,
          "m",
        ),
      );
      expect(r.stdout).toMatch(
        new RegExp(
          `^ok {4}tls port +127\\.0\\.0\\.1:${tlsPort} is held by this data dir's server .*: same certificate`,
          "m",
        ),
      );
      expect(r.stdout).not.toContain(":8420");
      // The same with flags naming other ports: the running server's ports are the ones that matter.
      const flagged = await runInferd({ args: ["doctor", "--data-dir", srv.dataDir, "--port", "1", "--json"] });
      const http = JSON.parse(flagged.stdout).checks.find((c: { name: string }) => c.name === "http port");
      expect(http).toMatchObject({
        status: "ok",
        detail: expect.stringContaining(`:${port} is held by this data dir's server`),
      });
    } finally {
      await srv.stop();
    }
    // Stopped: doctor looks at the ports serve would take.
    const after = await runInferd({ args: ["doctor", "--data-dir", srv.dataDir, "--port", "0"] });
    expect(after.stdout).toMatch(/^ok {4}http port +0: a free port is picked at start/m);
  }, 90_000);
});

describe("inferd model show", () => {
  test("a table for people, JSON with --json", async () => {
    const dataDir = tempDir("model-show");
    const file = join(tempDir("gguf"), "Tiny-Q8_0.gguf");
    writeTinyGguf(file);
    const pulled = await runInferd({ args: ["model", "pull", file, "--data-dir", dataDir] });
    expect(pulled.code).toBe(0);
    const shown = await runInferd({ args: ["model", "show", file, "--data-dir", dataDir] });
    expect(shown.code).toBe(0);
    const lines = shown.stdout.trimEnd().split("\n");
    const value = (field: string) =>
      lines
        .find((l) => l.startsWith(`${field} `))
        ?.slice(field.length)
        .trim();
    expect(value("source")).toBe(file);
    expect(value("status")).toBe("ready");
    expect(value("size")).toMatch(/^\d+(\.\d)? MiB$/);
    expect(value("files")).toBe("1 (Q8_0)");
    expect(value("used by")).toBe("no workload");
    expect(value("pulled for")).toMatch(/^the admin/);
    expect(value("shape")).toContain("llama");
    // Aligned: every field's value starts in the same column.
    const head = lines.slice(0, lines.indexOf(""));
    const column = (l: string) => /^\S+(?: \S+)*\s{2,}/.exec(l)![0].length;
    expect(new Set(head.map(column)).size).toBe(1);
    // Then the files, as a table with a header.
    expect(lines[lines.indexOf("") + 1]).toMatch(/^file\s+size\s+sha256$/);
    expect(lines.at(-1)).toMatch(/Tiny-Q8_0\.gguf\s+\d/);
    expect(() => JSON.parse(shown.stdout)).toThrow();

    const json = await runInferd({ args: ["model", "show", file, "--json", "--data-dir", dataDir] });
    expect(JSON.parse(json.stdout)).toMatchObject({
      source: file,
      state: "ready",
      files: [{ size: expect.any(Number) }],
    });
  }, 90_000);
});

describe("mistakes on the command line", () => {
  test("key create without --type names the option and its values", async () => {
    const dataDir = tempDir("key-type");
    expect((await runInferd({ args: ["project", "create", "Demo", "--data-dir", dataDir] })).code).toBe(0);
    const r = await runInferd({ args: ["key", "create", "--project", "demo", "--name", "ci", "--data-dir", dataDir] });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("key create needs --type sdk|live");
    const noName = await runInferd({
      args: ["key", "create", "--project", "demo", "--type", "live", "--data-dir", dataDir],
    });
    expect(noName.stderr).toContain("key create needs --name");
  });

  test("an unknown flag is called a flag, wherever it is", async () => {
    const dataDir = tempDir("flags");
    for (const args of [
      ["--frobnicate"],
      ["serve", "--frobnicate"],
      ["key", "list", "--frobnicate", "x"],
      ["model", "list", "--frobnicate"],
      ["desktop", "--frobnicate"],
      ["doctor", "--frobnicate"],
    ]) {
      const r = await runInferd({ args: [...args, "--data-dir", dataDir] });
      expect({ args, code: r.code }).toEqual({ args, code: 2 });
      expect(r.stderr).toContain("unknown flag --frobnicate");
      expect(r.stderr).not.toMatch(/unknown (command|argument|option)/);
    }
    const listed = await runInferd({ args: ["key", "create", "--typ", "sdk", "--data-dir", dataDir] });
    expect(listed.stderr).toContain("unknown flag --typ; this command takes --project, --name, --type");
    const command = await runInferd({ args: ["frobnicate", "--data-dir", dataDir] });
    expect(command.stderr).toContain('unknown command "frobnicate"');
  }, 90_000);
});
