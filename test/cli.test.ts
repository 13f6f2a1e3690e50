import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, statSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runCli } from "../src/cli";
import { loadConfig, describeConfig } from "../src/config";
import { startServer } from "../src/server";

const dirs: string[] = [];
const freshDir = () => {
  const d = mkdtempSync(join(tmpdir(), "inferd-cli-"));
  dirs.push(d);
  return d;
};
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

/** Runs the CLI in-process and collects what it prints. */
async function cli(dir: string, ...args: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runCli(
    ["--data-dir", dir, ...args],
    {},
    (s) => out.push(s),
    (s) => err.push(s),
  );
  return { code, out: out.join("\n"), err: err.join("\n") };
}

describe("headless CLI: project and key", () => {
  test("project create/list, key create/list/revoke, with --json", async () => {
    const dir = freshDir();
    const created = await cli(dir, "project", "create", "Edge Box", "--json");
    expect(created.code).toBe(0);
    const project = JSON.parse(created.out);
    expect(project).toMatchObject({ name: "Edge Box", slug: "edge-box" });
    const human = await cli(dir, "project", "create", "Other", "--slug", "other");
    expect(human.out).toContain("created project other");
    const list = JSON.parse((await cli(dir, "project", "list", "--json")).out);
    expect(list.map((p: { slug: string }) => p.slug)).toEqual(["edge-box", "other"]);
    expect((await cli(dir, "project", "list")).out).toMatch(/slug\s+name/);

    const key = JSON.parse(
      (
        await cli(
          dir,
          "key",
          "create",
          "--project",
          "edge-box",
          "--name",
          "ci",
          "--type",
          "live",
          "--endpoint",
          "edge-box/chat",
          "--json",
        )
      ).out,
    );
    expect(key).toMatchObject({ name: "ci", type: "live", scope: "endpoints", endpoints: ["edge-box/chat"] });
    expect(key.secret.startsWith("ik_live_")).toBe(true);
    const keys = JSON.parse((await cli(dir, "key", "list", "--project", "edge-box", "--json")).out);
    expect(keys).toHaveLength(1);
    expect(JSON.stringify(keys)).not.toContain(key.secret);
    const revoked = JSON.parse((await cli(dir, "key", "revoke", key.id, "--json")).out);
    expect(revoked.revoked_at).not.toBeNull();
  });

  test("key limits sets a key's priority and weight (fair share), and refuses a word that is not a priority", async () => {
    const dir = freshDir();
    await cli(dir, "project", "create", "Edge Box");
    const key = JSON.parse(
      (
        await cli(
          dir,
          "key",
          "create",
          "--project",
          "edge-box",
          "--name",
          "batchy",
          "--type",
          "live",
          "--priority",
          "batch",
          "--json",
        )
      ).out,
    );
    expect(key.limits).toMatchObject({ priority: "batch" });
    const set = await cli(dir, "key", "limits", key.id, "--weight", "3", "--priority", "interactive");
    expect(set.out).toContain("weight=3");
    expect(set.out).toContain("priority=interactive");
    const bad = await cli(dir, "key", "limits", key.id, "--priority", "urgent");
    expect(bad.code).not.toBe(0);
    expect(bad.err).toContain('priority: Invalid option: expected one of "interactive"|"batch"');
    const cleared = JSON.parse(
      (await cli(dir, "key", "limits", key.id, "--weight", "none", "--priority", "none", "--json")).out,
    );
    expect(cleared.limits).toMatchObject({ weight: null, priority: null });
  });

  test("mistakes exit non-zero with a message, not a stack trace", async () => {
    const dir = freshDir();
    const unknown = await cli(dir, "frobnicate");
    expect(unknown.code).toBe(2);
    expect(unknown.err).toContain('unknown command "frobnicate"');
    const missing = await cli(dir, "key", "create", "--name", "x", "--type", "sdk");
    expect(missing.code).toBe(2);
    expect(missing.err).toContain("--project");
    const noProject = await cli(dir, "key", "create", "--project", "ghost", "--name", "x", "--type", "sdk");
    expect(noProject.code).toBe(1);
    expect(noProject.err).toContain('project "ghost" not found');
    const badType = await cli(dir, "key", "create", "--project", "ghost", "--name", "x", "--type", "root");
    expect(badType.code).toBe(1);
    expect(badType.err).toContain("type");
    const badPort = await runCli(
      ["--port", "eighty"],
      {},
      () => {},
      () => {},
    );
    expect(badPort).toBe(2);
  });

  test("a key made with the CLI works against a running server on the same data dir", async () => {
    const dir = freshDir();
    const { config } = loadConfig(["--port", "0", "--data-dir", dir, "--no-local-agent"], {});
    const server = await startServer(config, () => {});
    try {
      await cli(dir, "project", "create", "Live", "--slug", "live");
      const key = JSON.parse(
        (await cli(dir, "key", "create", "--project", "live", "--name", "k", "--type", "sdk", "--json")).out,
      );
      const r = await fetch(`${server.url}/api/projects/live/workloads`, {
        headers: { authorization: `Bearer ${key.secret}` },
      });
      expect(r.status).toBe(200);
    } finally {
      await server.stop();
    }
  });
});

describe("serve: data dir, admin token, settings", () => {
  test("the admin token is generated once, saved 0600, printed once, and reused", async () => {
    const dir = freshDir();
    const { config } = loadConfig(["--port", "0", "--data-dir", dir], { INFERD_LOCAL_AGENT: "0" });
    const lines: string[] = [];
    const first = await startServer(config, (l) => lines.push(l));
    await first.stop();
    const file = join(dir, "admin-token");
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const token = readFileSync(file, "utf8").trim();
    expect(lines.join("\n")).toContain(token);
    expect(lines.join("\n")).toContain(`${first.url}/`);
    const again: string[] = [];
    const second = await startServer(config, (l) => again.push(l));
    expect(second.adminToken).toBe(token);
    expect(again.join("\n")).not.toContain(token);
    await second.stop();
  });

  test("INFERD_ADMIN_TOKEN wins over the saved token", async () => {
    const dir = freshDir();
    const { config } = loadConfig(["--port", "0", "--data-dir", dir, "--no-local-agent"], {
      INFERD_ADMIN_TOKEN: "my-own-admin-token",
    });
    const s = await startServer(config, () => {});
    try {
      expect(
        (await fetch(`${s.url}/admin/projects`, { headers: { authorization: "Bearer my-own-admin-token" } })).status,
      ).toBe(200);
    } finally {
      await s.stop();
    }
  });

  test("a second serve on the same data dir fails with a clear message; after stop it starts", async () => {
    const dir = freshDir();
    const { config } = loadConfig(["--port", "0", "--data-dir", dir, "--no-local-agent"], {});
    const s = await startServer(config, () => {});
    const second = await cli(dir, "--port", "0", "serve");
    expect(second.code).toBe(1);
    expect(second.err).toContain("already serving the data dir");
    expect(second.err).toContain(dir);
    await s.stop();
    const third = await startServer(config, () => {});
    await third.stop();
  });

  test("settings: flag beats env beats default, and config prints without secrets", () => {
    const { config, rest } = loadConfig(["--port=9000", "serve", "--no-local-agent"], {
      INFERD_PORT: "8000",
      INFERD_HOST: "0.0.0.0",
      INFERD_ADMIN_TOKEN: "sekrit",
    });
    expect(config).toMatchObject({ port: 9000, host: "0.0.0.0", localAgent: false, adminToken: "sekrit" });
    expect(rest).toEqual(["serve"]);
    expect(loadConfig([], {}).config.host).toBe("127.0.0.1");
    const printed = describeConfig(config);
    expect(printed).toContain("INFERD_PORT");
    expect(printed).not.toContain("sekrit");
  });
});
