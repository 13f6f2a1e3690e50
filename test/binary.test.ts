/**
 * Smoke test of the compiled executable, as a user meets it: one file copied alone into an empty
 * directory, started there on a data dir that does not exist yet. Built once per run of this file.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { copyFileSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import pkg from "../package.json";
import { buildStamp, buildTarget, TARGETS } from "../build/build";
import { cleanup, runInferd, startInferd, tempDir, waitFor, type Inferd } from "./helpers/proc";

const expectedVersion = pkg.version + buildStamp();
let bin: string;
let appDir: string;
let dataDir: string;
let server: Inferd;

/** The admin API with the server's token. */
const admin = (path: string, init: RequestInit = {}) =>
  fetch(`${server.url}${path}`, { ...init, headers: { authorization: `Bearer ${server.adminToken}`, "content-type": "application/json", ...init.headers } });

beforeAll(async () => {
  const built = await buildTarget("linux-x64", { outDir: tempDir("dist") });
  appDir = tempDir("app");
  bin = join(appDir, TARGETS["linux-x64"].file);
  copyFileSync(built.path, bin);
  dataDir = join(tempDir("data"), "store");
  server = await startInferd({ bin: [bin], dataDir, cwd: appDir });
});

afterAll(async () => {
  await server?.stop().catch(() => {});
  await cleanup();
});

describe("the compiled binary, alone in an empty directory", () => {
  test("serves /healthz with the stamped version", async () => {
    expect(readdirSync(appDir)).toEqual([TARGETS["linux-x64"].file]);
    const res = await fetch(`${server.url}/healthz`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ status: "ok", version: expectedVersion });
  });

  test("prints the admin token once and saves it owner-only", async () => {
    const line = await waitFor(() => /admin token \(.*\): (ik_admin_\S+)/.exec(server.output()), { what: "the admin token line", detail: server.output });
    expect(line[1]).toBe(server.adminToken);
    expect(server.output().split(server.adminToken).length - 1).toBe(1);
    const file = join(dataDir, "admin-token");
    expect(readFileSync(file, "utf8").trim()).toBe(server.adminToken);
    expect(statSync(file).mode & 0o777).toBe(0o600);
  });

  test("creates a project on the fresh store (embedded migrations ran)", async () => {
    const denied = await fetch(`${server.url}/admin/projects`, { method: "POST", body: JSON.stringify({ name: "Nope" }), headers: { "content-type": "application/json" } });
    expect(denied.status).toBe(401);
    const res = await admin("/admin/projects", { method: "POST", body: JSON.stringify({ name: "Smoke Test", slug: "smoke" }) });
    expect(res.status).toBe(201);
    expect(await res.json()).toMatchObject({ name: "Smoke Test", slug: "smoke" });
  });

  test("`inferd version` prints the stamped version", async () => {
    const r = await runInferd({ bin: [bin], args: ["version"], cwd: appDir });
    expect(r.code).toBe(0);
    expect(r.stdout.trim()).toBe(expectedVersion);
  });

  test("a second serve on the same data dir exits non-zero, naming the data dir", async () => {
    const r = await runInferd({ bin: [bin], args: ["serve", "--port", "0", "--data-dir", dataDir], cwd: appDir });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain(dataDir);
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
  });

  test("SIGTERM stops it with exit code 0 and a restart keeps the project", async () => {
    expect(await server.stop()).toBe(0);
    server = await startInferd({ bin: [bin], dataDir, cwd: appDir });
    const res = await admin("/admin/projects");
    expect(res.status).toBe(200);
    expect(((await res.json()) as { slug: string }[]).map((p) => p.slug)).toContain("smoke");
    expect(server.output()).not.toContain("admin token (");
  });

  test("ignores .env and bunfig.toml in the directory it starts in", async () => {
    const dir = tempDir("dotenv");
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, ".env"), "INFERD_LOG_LEVEL=debug\n");
    writeFileSync(join(dir, "preload.ts"), 'console.log("PRELOADED FROM BUNFIG");\n');
    writeFileSync(join(dir, "bunfig.toml"), 'preload = ["./preload.ts"]\n');
    const r = await runInferd({ bin: [bin], args: ["config"], cwd: dir });
    expect(r.code).toBe(0);
    expect(r.output).not.toContain("PRELOADED FROM BUNFIG");
    expect(r.stdout.split("\n").find((l) => l.startsWith("--log-level"))).toContain('"info"');
  });
});
