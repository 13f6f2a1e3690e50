import { ConfigError, describeConfig, loadConfig, type Config } from "./config";
import type { Db } from "./db";
import { dataPaths, ensureDataDir, DataDirLocked, lockDataDir } from "./datadir";
import { AppError, fromSchemaIssue } from "./errors";
import { createProject, getProject, listProjects } from "./projects/service";
import { ProjectCreate } from "./projects/schema";
import { createKey, listKeys, revokeKey, setKeyLimits } from "./keys/service";
import { KeyLimits } from "./limits/schema";
import { withActor, type Actor } from "./audit/service";
import { userInfo } from "node:os";
import { commandHint } from "./invocation";

/** Who the audit log says made a change from the command line. */
const CLI_ACTOR: Actor = {
  type: "cli",
  label: `inferd CLI (${(() => {
    try {
      return process.env.USER || userInfo().username;
    } catch {
      return "unknown user";
    }
  })()})`,
};
import { KeyCreate } from "./keys/schema";
import { setLogLevel } from "./log";
import { startServer } from "./server";
import { openConfiguredStore } from "./store/open";
import { VERSION } from "./version";
import type { z } from "zod";
import { Agent } from "../agent/agent";
import {
  AgentFatal,
  joinHost,
  loadAgentState,
  peerState,
  RemoteHostLink,
  saveAgentState,
  type AgentState,
} from "../agent/remote";
import { ClusterLink } from "../agent/cluster-link";
import { WorkPuller } from "../agent/puller";
import { probeMachine } from "../agent/gpu";
import { builtinLlama } from "../agent/runtimes/builtin";
import { desktop } from "./desktop";
import { restrictUmask, tightenDataDir } from "./perms";
import { modelCommand } from "./models/cli";
import { adapterCommand } from "./adapters/cli";
import { LaunchError, launchCommand } from "./launch";
import { userCommand } from "./users/cli";
import { backupCommand, doctorCommand, restoreCommand } from "./store/commands";
import { migrateCommand } from "./store/migrate";
import { isPostgresUrl } from "./db";
import { table } from "./text-table";

const HELP = `inferd ${VERSION}: a small inference cloud on your own GPUs

usage:
  inferd [serve] [settings]            run the server, dashboard and local GPU agent
  inferd project create <name> [--slug S] [--json]
  inferd project list [--json]
  inferd key create --project P --name N --type sdk|live [--scope project|endpoints] [--endpoint P/W]... [limits] [--json]
  inferd key list --project P [--json]
  inferd key revoke <key-id> [--json]
  inferd key limits <key-id> [--rpm N] [--tpm N] [--max-concurrent N] [--tokens-per-day N] [--tokens-per-month N] [--weight N] [--priority interactive|batch]   (or none)
  inferd user add <email> --role admin|operator|viewer [--project P]... [--name N] [--password-stdin] [--json]
  inferd user list | set <email> [--role R] [--project P]... [--name N] [--password-stdin] | rm <email>
                                       people who sign in to the dashboard (inferd user --help)
  inferd model pull <source> | list | show <id|source> | rm <id|source> [--json]
                                       get models into the store (hf:owner/repo[:QUANT], hf:owner/repo/file.gguf, https://…, a local path)
  inferd adapters list <workload> | add <workload> <name> <source> | rm <workload> <name> [--json]
                                       LoRA adapters of a vLLM, SGLang or llama.cpp workload (through the running server)
  inferd agent join https://HOST:PORT --token T   join a host as a remote GPU worker, then run
  inferd agent                         run as the remote worker this data dir joined before
                                       (not joined yet: joins --join-url with --join-token first)
  inferd backup [<file>]               a verified copy of the store (default: <data-dir>/backups/), also while serving
  inferd restore <file>                put a backup in place of the store (the server must be stopped)
  inferd store migrate --to postgres://… [--dry-run] [--json]
                                       copy the embedded store into an empty PostgreSQL database (cluster mode; the server must be stopped)
  inferd doctor [--json]               check the data dir, store, backups, disk, GPUs, runtimes, ports, certificate
  inferd doctor --engines [--json]     each engine here: version, readiness, capacity assumed and why, own routes, what is missing
  inferd launch claude|codex|opencode|cn|qwen [--project P] [--workload W] [--print] [-- <its arguments>]
                                       run a coding agent against this server's chat workload that calls tools
  inferd desktop                       open the dashboard in an app window (starts the server if needed)
  inferd config                        print every setting with its value in force
  inferd version

project, key and user commands work on the data dir directly, whether or not a server is running.

settings (flag, environment variable):
`;

/** Wrong command-line usage: the CLI prints the message and exits 2. */
class UsageError extends Error {}

/** The refusal of a flag the command does not take, naming the ones it does. */
const unknownFlag = (flag: string, known: string[]) =>
  new UsageError(
    `unknown flag ${flag}; this command takes ${[...known.map((k) => `--${k}`), "--json"].join(", ")} (and the settings in inferd help)`,
  );

/** Refuses anything after a command that takes no arguments of its own (settings are taken out before). */
function noArgs(cmd: string, args: string[]): void {
  const [first] = args;
  if (first === undefined) return;
  throw new UsageError(
    first.startsWith("-")
      ? `unknown flag ${first} (see ${commandHint("help")} for the settings)`
      : `${cmd} takes no argument, got "${first}" (see ${commandHint("help")})`,
  );
}

/** Splits subcommand arguments into positionals, repeatable `--name value` options and `--json`. */
function parseArgs(args: string[], valued: string[]): { pos: string[]; opt: Record<string, string[]>; json: boolean } {
  const pos: string[] = [];
  const opt: Record<string, string[]> = {};
  let json = false;
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (a === "--json") json = true;
    else if (a.startsWith("--")) {
      const [name, inline] = a.includes("=")
        ? [a.slice(2, a.indexOf("=")), a.slice(a.indexOf("=") + 1)]
        : [a.slice(2), undefined];
      if (!valued.includes(name)) throw unknownFlag(`--${name}`, valued);
      const v = inline ?? args[++i];
      if (v === undefined) throw new UsageError(`--${name} needs a value`);
      (opt[name] ??= []).push(v);
    } else pos.push(a);
  }
  return { pos, opt, json };
}

/** Validates CLI input with the same schema the API uses, reporting in the API's words. */
function check<T>(schema: z.ZodType<T>, value: unknown): T {
  const r = schema.safeParse(value);
  if (!r.success) throw fromSchemaIssue("input", r.error.issues[0] as never);
  return r.data;
}

/** Runs `fn` on the store the settings name (the data dir's SQLite file, or `--database-url`), then closes it. */
async function withStore<T>(config: Config, fn: (db: Db) => Promise<T>): Promise<T> {
  ensureDataDir(config.dataDir);
  const store = await openConfiguredStore(config);
  try {
    return await fn(store.db);
  } finally {
    await store.close();
  }
}

async function projectCommand(config: Config, args: string[], out: (s: string) => void): Promise<void> {
  const [verb, ...rest] = args;
  const { pos, opt, json } = parseArgs(rest, ["slug"]);
  if (verb === "create") {
    if (pos.length !== 1) throw new UsageError("usage: inferd project create <name> [--slug S] [--json]");
    const p = await withStore(config, (db) =>
      createProject(db, check(ProjectCreate, { name: pos[0], slug: opt.slug?.[0] })),
    );
    out(json ? JSON.stringify(p) : `created project ${p.slug} (${p.id})`);
  } else if (verb === "list") {
    const list = await withStore(config, (db) => listProjects(db));
    out(json ? JSON.stringify(list) : table(list, ["id", "slug", "name", "created_at"]));
  } else throw new UsageError("usage: inferd project create|list");
}

async function keyCommand(config: Config, args: string[], out: (s: string) => void): Promise<void> {
  const [verb, ...rest] = args;
  const { pos, opt, json } = parseArgs(rest, ["project", "name", "type", "scope", "endpoint", ...LIMIT_OPTIONS]);
  const limits = limitsOf(opt);
  if (verb === "create") {
    for (const [name, what] of [
      ["project", "--project <slug or id>"],
      ["name", "--name <a name for the key>"],
      ["type", "--type sdk|live (sdk: manages the project through /api; live: calls its endpoints)"],
    ])
      if (!opt[name]?.[0]) throw new UsageError(`key create needs ${what}`);
    const input = check(KeyCreate, {
      name: opt.name?.[0],
      type: opt.type?.[0],
      scope: opt.scope?.[0],
      endpoints: opt.endpoint,
      ...(Object.keys(limits).length ? { limits } : {}),
    });
    const k = await withStore(config, async (db) => createKey(db, await getProject(db, opt.project[0]), input));
    out(
      json
        ? JSON.stringify(k)
        : `created ${k.type} key ${k.id} (${k.scope}${k.endpoints.length ? `: ${k.endpoints.join(", ")}` : ""})\nsecret (shown once, keep it safe): ${k.secret}`,
    );
  } else if (verb === "list") {
    if (!opt.project?.[0]) throw new UsageError("--project is required");
    const list = await withStore(config, async (db) => listKeys(db, (await getProject(db, opt.project[0])).id));
    if (json) out(JSON.stringify(list));
    else
      out(
        table(
          list.map((k) => ({
            ...k,
            requests: k.usage.requests,
            tokens: k.usage.total_tokens,
            last_used: k.usage.last_used_at ?? "never",
            revoked: k.revoked_at ?? "",
          })),
          ["id", "name", "type", "scope", "prefix", "requests", "tokens", "last_used", "revoked"],
        ),
      );
  } else if (verb === "revoke") {
    if (pos.length !== 1) throw new UsageError("usage: inferd key revoke <key-id>");
    const k = await withStore(config, (db) => revokeKey(db, pos[0]));
    out(json ? JSON.stringify(k) : `revoked key ${k.id} (${k.name})`);
  } else if (verb === "limits") {
    if (pos.length !== 1)
      throw new UsageError(
        "usage: inferd key limits <key-id> [--rpm N] [--tpm N] [--max-concurrent N] [--tokens-per-day N] [--tokens-per-month N] [--weight N] [--priority interactive|batch] (none: removes that limit)",
      );
    const k = await withStore(config, (db) => setKeyLimits(db, pos[0], check(KeyLimits, limits)));
    out(
      json
        ? JSON.stringify(k)
        : `limits of key ${k.id} (${k.name}): ${Object.entries(k.limits)
            .map(([n, v]) => `${n}=${v ?? "none"}`)
            .join(" ")}`,
    );
  } else throw new UsageError("usage: inferd key create|list|revoke|limits");
}

/** The CLI options that set a key's limits. */
const LIMIT_OPTIONS = ["rpm", "tpm", "max-concurrent", "tokens-per-day", "tokens-per-month", "weight", "priority"];

/**
 * Limits from `--rpm 60 --tokens-per-day none --priority batch` style options (`none` removes one);
 * `--priority` passes its word on for the server's own check (interactive or batch).
 */
function limitsOf(opt: Record<string, string[]>): Record<string, number | string | null> {
  const out: Record<string, number | string | null> = {};
  for (const name of LIMIT_OPTIONS) {
    const v = opt[name]?.[0];
    if (v === undefined) continue;
    if (name === "priority") {
      out.priority = v === "none" ? null : v;
      continue;
    }
    const n = Number(v);
    if (v !== "none" && !(Number.isInteger(n) && n > 0))
      throw new UsageError(`--${name} takes a positive whole number or "none", not "${v}"`);
    out[name.replace(/-/g, "_")] = v === "none" ? null : n;
  }
  return out;
}

/** `inferd store migrate --to postgres://… [--dry-run] [--json]`: the embedded store into an empty PostgreSQL database. */
async function storeCommand(
  config: Config,
  args: string[],
  out: (s: string) => void,
  err: (s: string) => void,
): Promise<number> {
  const usage = "usage: inferd store migrate --to postgres://user:password@host:port/database [--dry-run] [--json]";
  const [verb, ...rest] = args;
  const { pos, opt, json } = parseArgs(
    rest.filter((a) => a !== "--dry-run"),
    ["to"],
  );
  if (verb !== "migrate" || pos.length || opt.to?.length !== 1) throw new UsageError(usage);
  if (!isPostgresUrl(opt.to[0])) throw new UsageError(`--to must be a postgres:// URL; ${usage}`);
  return migrateCommand(config.dataDir, { to: opt.to[0], dryRun: rest.includes("--dry-run"), json }, out, err);
}

/**
 * The data dir's join state, joining first when asked: by `inferd agent join URL --token T`, or, while
 * the data dir has not joined, by --join-url and --join-token (a DaemonSet's environment).
 */
async function agentState(
  config: Config,
  verb: string | undefined,
  rest: string[],
  out: (s: string) => void,
): Promise<AgentState | undefined> {
  const join = async (url: string, token: string) => {
    const joined = await joinHost(url, token, config.dataDir, VERSION, await probeMachine()).catch((e) => {
      throw e instanceof AgentFatal
        ? new UsageError(e.message)
        : new UsageError(`could not reach the host at ${url}: ${(e as Error).message}`);
    });
    out(
      `joined ${joined.host_url} as worker ${joined.worker_id}; from now on \`inferd agent --data-dir ${config.dataDir}\` reconnects by itself`,
    );
    return joined;
  };
  if (verb === "join") {
    const { pos, opt } = parseArgs(rest, ["token"]);
    if (pos.length !== 1 || !opt.token?.[0])
      throw new UsageError("usage: inferd agent join https://HOST:PORT --token <join token>");
    return join(pos[0], opt.token[0]);
  }
  if (verb !== undefined) throw new UsageError("usage: inferd agent [join https://HOST:PORT --token T]");
  const saved = loadAgentState(config.dataDir);
  if (saved || (!config.joinUrl && !config.joinToken)) return saved;
  if (!config.joinUrl || !config.joinToken)
    throw new UsageError(
      "set both --join-url and --join-token (INFERD_JOIN_URL, INFERD_JOIN_TOKEN) to join at first start",
    );
  return join(config.joinUrl, config.joinToken);
}

/** `inferd agent [join URL --token T]`: a remote GPU worker that connects out to its host. */
async function agentCommand(
  config: Config,
  args: string[],
  out: (s: string) => void,
  err: (s: string) => void,
): Promise<void> {
  const [verb, ...rest] = args;
  restrictUmask();
  ensureDataDir(config.dataDir);
  for (const line of tightenDataDir(config.dataDir)) err(`inferd agent: file permissions: ${line}`);
  const state = await agentState(config, verb, rest, out);
  if (!state)
    throw new UsageError(
      `this data dir (${config.dataDir}) has not joined a host yet: run \`${commandHint("agent join https://HOST:PORT --token <join token>")}\` (the dashboard's Workers → Add worker shows it)`,
    );
  lockDataDir(config.dataDir).update(`agent for ${state.host_url}`);
  let stopping = false;
  const shutdown = async (code: number, why: string) => {
    if (stopping) return;
    stopping = true;
    (code === 0 ? out : err)(why);
    link.stop();
    await cluster.stop();
    await puller.stop();
    await agent.stop();
    process.exit(code);
  };
  const joined = state;
  const fatal = (e: AgentFatal) => void shutdown(3, `inferd agent: ${e.message}`);
  // The joined host, and every other live host of its cluster (told with each heartbeat answer).
  const link = new RemoteHostLink(
    joined,
    VERSION,
    fatal,
    (hostId, hosts) => void cluster.setPeers(hosts.filter((h) => h.id !== (hostId ?? joined.host_id))),
  );
  const cluster = new ClusterLink(link, {
    connect: async (h) => new RemoteHostLink(await peerState(joined, h), VERSION, fatal),
    onPeers: (peers) => {
      if (JSON.stringify(peers) !== JSON.stringify(joined.peers ?? []))
        saveAgentState(config.dataDir, { ...joined, peers });
      joined.peers = peers;
    },
    onTrouble: (h, e) => err(`inferd agent: host ${h.id} (${h.agent_url}) cannot be reached: ${e.message}`),
  });
  const agent = new Agent({
    host: cluster,
    dataDir: config.dataDir,
    telemetryMs: config.telemetryMs,
    builtinLlama: () => builtinLlama(config.dataDir),
    runtimeEnv: config.runtimeEnv,
    clusterAddress: config.clusterAddress,
    supervisor: {
      startTimeoutMs: config.startTimeoutMs,
      stallTimeoutMs: config.stallTimeoutMs,
      restart: { baseMs: config.restartBackoffMs, maxMs: 60_000, maxCrashes: config.maxCrashes, windowMs: 10 * 60_000 },
    },
  });
  const puller = new WorkPuller(link, (id) => cluster.replica(id));
  process.on("SIGINT", () => void shutdown(0, "SIGINT: stopping the agent…"));
  process.on("SIGTERM", () => void shutdown(0, "SIGTERM: stopping the agent…"));
  await agent.start();
  puller.start();
  // The hosts heard of last time, until the joined host's first heartbeat answer says who is alive.
  if (joined.peers?.length) void cluster.setPeers(joined.peers);
  out(`inferd agent ${VERSION} running as worker ${state.worker_id} for ${state.host_url}`);
}

async function serve(config: Config): Promise<void> {
  // Signals are handled from the start: one during start-up stops the server as soon as it is up.
  let running: Awaited<ReturnType<typeof startServer>> | undefined;
  let asked: string | undefined;
  let stopping = false;
  const stop = async (signal: string) => {
    asked = signal;
    if (stopping || !running) return;
    stopping = true;
    console.log(`\n${signal}: stopping inferd…`);
    await running.stop();
    process.exit(0);
  };
  process.on("SIGINT", () => void stop("SIGINT"));
  process.on("SIGTERM", () => void stop("SIGTERM"));
  running = await startServer(config);
  if (asked) await stop(asked);
}

/**
 * Runs the command line: `serve` (the default), `project`, `key`, `user`, `model`, `adapters`, `agent`, `backup`, `restore`,
 * `store`, `doctor`, `desktop`, `config`, `version`, `help`.
 * Returns the exit code for commands that finish; `serve` keeps running.
 */
export async function runCli(
  argv: string[],
  env: Record<string, string | undefined>,
  out = (s: string) => console.log(s),
  err = (s: string) => console.error(s),
  /** Runs before a command that keeps running starts anything (the executable raises its fetch limit there). */
  beforeRunning: () => void = () => {},
): Promise<number | "running"> {
  try {
    const { config, rest } = loadConfig(argv, env);
    setLogLevel(config.logLevel);
    const [cmd = "serve", ...args] = rest;
    switch (cmd) {
      case "serve":
        noArgs(cmd, args);
        beforeRunning();
        await serve(config);
        return "running";
      case "project":
        await withActor(CLI_ACTOR, () => projectCommand(config, args, out));
        return 0;
      case "key":
        await withActor(CLI_ACTOR, () => keyCommand(config, args, out));
        return 0;
      case "user":
        return await withActor(CLI_ACTOR, () => userCommand(config, args, out, err));
      case "model":
        for (const a of args) if (a.startsWith("-") && a !== "--json") throw unknownFlag(a, []);
        return await withActor(CLI_ACTOR, () => modelCommand(config, args, out, err));
      case "adapters":
        return await adapterCommand(config, args, out, err);
      case "agent":
        beforeRunning();
        await agentCommand(config, args, out, err);
        return "running";
      case "backup":
      case "restore": {
        const { pos } = parseArgs(args, []);
        if (pos.length > 1 || (cmd === "restore" && pos.length !== 1))
          throw new UsageError(`usage: inferd ${cmd === "backup" ? "backup [<file>]" : "restore <file>"}`);
        if (cmd === "restore") return restoreCommand(config, pos[0], out, err);
        out(await backupCommand(config, pos[0]));
        return 0;
      }
      case "store":
        return await storeCommand(config, args, out, err);
      case "launch":
        return await launchCommand(config, args, out).catch((e) => {
          throw e instanceof LaunchError ? new UsageError(e.message) : e;
        });
      case "doctor":
        return await doctorCommand(
          config,
          parseArgs(
            args.filter((a) => a !== "--engines"),
            [],
          ).json,
          out,
          args.includes("--engines"),
        );
      case "desktop":
        noArgs(cmd, args);
        return await desktop(config, out, err);
      case "config":
        noArgs(cmd, args);
        out(describeConfig(config));
        return 0;
      case "version":
      case "--version":
        out(VERSION);
        return 0;
      case "help":
      case "--help":
      case "-h":
        out(HELP + describeConfig(config));
        return 0;
      default:
        throw new UsageError(
          cmd.startsWith("-")
            ? `unknown flag ${cmd} (see ${commandHint("help")} for the settings)`
            : `unknown command "${cmd}" (see ${commandHint("help")})`,
        );
    }
  } catch (e) {
    if (e instanceof UsageError || e instanceof ConfigError) {
      err(`inferd: ${e.message}`);
      return 2;
    }
    if (e instanceof AppError || e instanceof DataDirLocked) {
      err(`inferd: ${e.message}`);
      return 1;
    }
    if ((e as NodeJS.ErrnoException)?.code === "EADDRINUSE") {
      err(`inferd: the port is already in use (${(e as Error).message}); pick another with --port`);
      return 1;
    }
    err(`inferd: ${e instanceof Error ? e.message : String(e)}`);
    return 1;
  }
}
