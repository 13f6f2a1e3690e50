/**
 * `inferd user add|list|set|rm` on a data dir: users made on the command line sign in to a server
 * on the same data dir; a password comes from standard input or is generated and shown once;
 * mistakes name the flag.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { runCli } from "../src/cli";
import { loadConfig } from "../src/config";
import { startServer } from "../src/server";
import { cleanup, sourceBin, tempDir } from "./helpers/proc";

afterAll(cleanup);
const freshDir = () => tempDir("user-cli");

/** Runs the CLI in-process on a data dir; what it printed, joined. */
async function cli(dir: string, ...args: string[]) {
  const printed = { out: [] as string[], err: [] as string[] };
  const code = await runCli(
    ["--data-dir", dir, ...args],
    {},
    (line) => printed.out.push(line),
    (line) => printed.err.push(line),
  );
  return { code, out: printed.out.join("\n"), err: printed.err.join("\n") };
}

/** Runs the real `inferd` command with `input` on its standard input. */
async function withStdin(dir: string, input: string, ...args: string[]) {
  const p = Bun.spawn([...sourceBin(), "--data-dir", dir, ...args], {
    stdin: new TextEncoder().encode(input),
    stdout: "pipe",
    stderr: "pipe",
  });
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  return { code, out, err };
}

/** Whether `email` can sign in with `password` on a server of that data dir. */
async function signsIn(url: string, email: string, password: string): Promise<number> {
  return (
    await fetch(`${url}/admin/session`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ email, password }),
    })
  ).status;
}

describe("inferd user", () => {
  test("add with a generated password, list, set, rm; the users sign in to the server of the data dir", async () => {
    const dir = freshDir();
    await cli(dir, "project", "create", "Demo");
    const added = await cli(
      dir,
      "user",
      "add",
      "Ann@Example.com",
      "--role",
      "operator",
      "--project",
      "demo",
      "--name",
      "Ann",
    );
    expect(added.code).toBe(0);
    expect(added.out).toContain("added ann@example.com");
    expect(added.out).toContain("operator of demo");
    const generated = /password \(shown once, keep it safe\): (\S+)/.exec(added.out)![1];
    expect(generated.length).toBeGreaterThanOrEqual(12);

    const piped = await withStdin(
      dir,
      "a password from a pipe\n",
      "user",
      "add",
      "ben@example.com",
      "--role",
      "viewer",
      "--password-stdin",
      "--json",
    );
    expect(piped.code).toBe(0);
    const ben = JSON.parse(piped.out);
    expect(ben).toMatchObject({ email: "ben@example.com", role: "viewer", projects: [] });
    expect(ben.password).toBeUndefined();

    const list = JSON.parse((await cli(dir, "user", "list", "--json")).out) as { email: string; role: string }[];
    expect(list.map((u) => `${u.email}:${u.role}`)).toEqual(["ann@example.com:operator", "ben@example.com:viewer"]);
    expect((await cli(dir, "user", "list")).out).toMatch(/email\s+name\s+role\s+projects/);

    const set = await cli(dir, "user", "set", "ben@example.com", "--role", "operator", "--project", "demo");
    expect(set.out).toContain("changed ben@example.com");
    expect(set.out).toContain("operator of demo");

    const { config } = loadConfig(["--port", "0", "--data-dir", dir, "--no-local-agent", "--log-level", "error"], {});
    const server = await startServer(config, () => {});
    try {
      expect(await signsIn(server.url, "ann@example.com", generated)).toBe(200);
      expect(await signsIn(server.url, "ben@example.com", "a password from a pipe")).toBe(200);
      // The CLI works beside the running server; a removed user cannot sign in any more.
      expect((await cli(dir, "user", "rm", "ann@example.com")).out).toContain("removed ann@example.com");
      expect(await signsIn(server.url, "ann@example.com", generated)).toBe(401);
      const audit = (
        await (
          await fetch(`${server.url}/admin/audit?action=user`, {
            headers: { authorization: `Bearer ${server.adminToken}` },
          })
        ).json()
      ).entries as { action: string; actor: { type: string } }[];
      expect(audit.map((e) => e.action)).toEqual(["user.delete", "user.update", "user.create", "user.create"]);
      expect(audit.every((e) => e.actor.type === "cli")).toBe(true);
    } finally {
      await server.stop();
    }
  });

  test("mistakes name the flag and change nothing", async () => {
    const dir = freshDir();
    const noRole = await cli(dir, "user", "add", "x@example.com");
    expect(noRole.code).toBe(2);
    expect(noRole.err).toContain("--role");
    const badRole = await cli(dir, "user", "add", "x@example.com", "--role", "owner");
    expect(badRole.code).toBe(2);
    expect(badRole.err).toContain("--role:");
    const short = await withStdin(
      dir,
      "short\n",
      "user",
      "add",
      "x@example.com",
      "--role",
      "viewer",
      "--password-stdin",
    );
    expect(short.code).toBe(2);
    expect(short.err).toContain("--password-stdin: must be at least 12 characters");
    const noProject = await cli(dir, "user", "add", "x@example.com", "--role", "viewer", "--project", "nope");
    expect(noProject.code).toBe(1);
    expect(noProject.err).toContain('--project: there is no project "nope"');
    const badEmail = await cli(dir, "user", "add", "not-an-email", "--role", "viewer");
    expect(badEmail.err).toContain("<email>: must be an e-mail address");
    const unknown = await cli(dir, "user", "add", "x@example.com", "--role", "viewer", "--password", "p");
    expect(unknown.code).toBe(2);
    expect(unknown.err).toContain("unknown flag --password");
    expect((await cli(dir, "user", "rm", "nobody@example.com")).err).toContain('user "nobody@example.com" not found');
    expect(JSON.parse((await cli(dir, "user", "list", "--json")).out)).toEqual([]);
    await cli(dir, "user", "add", "x@example.com", "--role", "viewer");
    const taken = await cli(dir, "user", "add", "X@example.com", "--role", "viewer");
    expect(taken.code).toBe(1);
    expect(taken.err).toContain('a user with the e-mail "x@example.com" exists');
    expect((await cli(dir, "user", "set", "x@example.com")).err).toContain("needs something to change");
  });

  test("--help explains the commands and roles", async () => {
    const dir = freshDir();
    const help = await cli(dir, "user", "--help");
    expect(help.code).toBe(0);
    for (const words of [
      "inferd user add <email> --role",
      "--password-stdin",
      "inferd user rm <email>",
      "viewer (looks at their projects)",
    ])
      expect(help.out).toContain(words);
    expect((await cli(dir, "user", "add", "--help")).out).toContain("inferd user set");
    expect((await cli(dir, "help")).out).toContain("inferd user add <email>");
  });
});
