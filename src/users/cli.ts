/**
 * `inferd user add|list|set|rm`: people who sign in to the dashboard, managed on the data dir's
 * store directly (as `project` and `key` are), whether or not a server is running. A password comes
 * from standard input (`--password-stdin`), or is generated and printed once.
 */
import type { Config } from "../config";
import { ensureDataDir } from "../datadir";
import { openConfiguredStore } from "../store/open";
import type { Db } from "../db";
import { AppError, fromSchemaIssue } from "../errors";
import { table } from "../text-table";
import { UserCreate, UserPatch } from "./schema";
import { createUser, deleteUser, generatePassword, listUsers, resolveUser, updateUser, type UserView } from "./service";

/** What `inferd user --help` prints. */
export const USER_HELP = `usage:
  inferd user add <email> --role admin|operator|viewer [--project P]... [--name N] [--password-stdin] [--json]
                       add a user; without --password-stdin a password is generated and printed once
  inferd user list [--json]
  inferd user set <email> [--role R] [--project P]... [--name N] [--password-stdin] [--json]
                       change a user (--project replaces their projects)
  inferd user rm <email>
                       remove a user; their dashboard sessions end at once
roles: admin (everything), operator (workloads, keys, webhooks, jobs of their projects; workers and models),
viewer (looks at their projects). A password is 12 characters or more.`;

/** Wrong usage: printed, exit 2. */
class UsageError extends Error {}

/** The flag each request field comes from, to name it in errors. */
const FLAG_OF: Record<string, string> = {
  email: "<email>",
  role: "--role",
  name: "--name",
  password: "--password-stdin",
  projects: "--project",
};

/** Options of a user command: positionals, `--role/--project/--name` values, and the switches. */
function parse(args: string[]): {
  pos: string[];
  opt: Record<string, string[]>;
  json: boolean;
  stdin: boolean;
  help: boolean;
} {
  const out = { pos: [] as string[], opt: {} as Record<string, string[]>, json: false, stdin: false, help: false };
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (a === "--json") out.json = true;
    else if (a === "--password-stdin") out.stdin = true;
    else if (a === "--help" || a === "-h") out.help = true;
    else if (a.startsWith("-")) {
      const [name, inline] = a.includes("=")
        ? [a.slice(2, a.indexOf("=")), a.slice(a.indexOf("=") + 1)]
        : [a.slice(2), undefined];
      if (!["role", "project", "name"].includes(name))
        throw new UsageError(
          `unknown flag ${a}; user commands take --role, --project, --name, --password-stdin, --json`,
        );
      const v = inline ?? args[++i];
      if (v === undefined) throw new UsageError(`--${name} needs a value`);
      (out.opt[name] ??= []).push(v);
    } else out.pos.push(a);
  }
  return out;
}

/** Validates with the API's schema, naming the flag of a refused field. */
function check<T>(
  schema: { safeParse(v: unknown): { success: true; data: T } | { success: false; error: { issues: unknown[] } } },
  value: unknown,
): T {
  const r = schema.safeParse(value);
  if (r.success) return r.data;
  const e = fromSchemaIssue("input", r.error.issues[0] as never);
  const field = e.field?.split(".")[0] ?? "";
  throw new UsageError(`${FLAG_OF[field] ?? field}: ${e.message.replace(/^[^:]*: /, "")}`);
}

/** One user as a line of text. */
const line = (u: UserView) =>
  `${u.email} (${u.id}): ${u.role}${u.projects.length ? ` of ${u.projects.join(", ")}` : ""}`;

/** What a verb gets: positionals, the user fields from flags, the password from stdin, and --json. */
interface VerbInput {
  pos: string[];
  fields: { role?: string; name?: string; projects?: string[] };
  password: string | undefined;
  json: boolean;
}

/** Each verb on an open store; returns what to print. */
const verbs: Record<string, (db: Db, a: VerbInput) => Promise<string>> = {
  async add(db, { pos, fields, password, json }) {
    if (pos.length !== 1)
      throw new UsageError(
        "usage: inferd user add <email> --role admin|operator|viewer [--project P]... [--name N] [--password-stdin]",
      );
    if (!fields.role) throw new UsageError("--role: user add needs --role admin, operator or viewer");
    const generated = password === undefined ? generatePassword() : undefined;
    const u = await createUser(db, check(UserCreate, { email: pos[0], ...fields, password: password ?? generated }));
    if (json) return JSON.stringify(generated ? { ...u, password: generated } : u);
    return `added ${line(u)}${generated ? `\npassword (shown once, keep it safe): ${generated}` : ""}`;
  },
  async list(db, { pos, json }) {
    if (pos.length) throw new UsageError("usage: inferd user list [--json]");
    const list = await listUsers(db);
    if (json) return JSON.stringify(list);
    return table(
      list.map((u) => ({ ...u, projects: u.projects.join(",") || "-", last_sign_in: u.last_sign_in_at ?? "never" })),
      ["id", "email", "name", "role", "projects", "source", "sessions", "last_sign_in"],
    );
  },
  async set(db, { pos, fields, password, json }) {
    if (pos.length !== 1)
      throw new UsageError("usage: inferd user set <email> [--role R] [--project P]... [--name N] [--password-stdin]");
    const patch = check(UserPatch, { ...fields, password });
    if (!Object.values(patch).some((v) => v !== undefined))
      throw new UsageError("user set needs something to change: --role, --project, --name or --password-stdin");
    const u = await updateUser(db, (await resolveUser(db, pos[0])).id, patch);
    return json ? JSON.stringify(u) : `changed ${line(u)}`;
  },
  async rm(db, { pos, json }) {
    if (pos.length !== 1) throw new UsageError("usage: inferd user rm <email>");
    const u = await resolveUser(db, pos[0]);
    await deleteUser(db, u.id);
    return json ? JSON.stringify({ removed: u.id }) : `removed ${u.email} (${u.id})`;
  },
};

/**
 * `inferd user …`; returns the exit code (2: wrong usage, 1: refused, e.g. a taken e-mail).
 * `readStdin` gives the password for `--password-stdin` (standard input by default).
 */
export async function userCommand(
  config: Config,
  args: string[],
  out: (s: string) => void,
  err: (s: string) => void,
  readStdin: () => Promise<string> = () => Bun.stdin.text(),
): Promise<number> {
  const [verb, ...rest] = args;
  try {
    const { pos, opt, json, stdin, help } = parse(rest);
    if (help || verb === undefined || verb === "--help" || verb === "-h" || verb === "help") {
      out(USER_HELP);
      return verb === undefined ? 2 : 0;
    }
    const password = stdin ? (await readStdin()).replace(/\r?\n$/, "") : undefined;
    const fields = { role: opt.role?.[0], name: opt.name?.[0], projects: opt.project };
    const act = Object.hasOwn(verbs, verb) ? verbs[verb] : undefined;
    if (!act) throw new UsageError(`unknown user command "${verb}"\n${USER_HELP}`);
    ensureDataDir(config.dataDir);
    const store = await openConfiguredStore(config);
    try {
      out(await act(store.db, { pos, fields, password, json }));
    } finally {
      await store.close();
    }
    return 0;
  } catch (e) {
    if (e instanceof UsageError) {
      err(`inferd: ${e.message}`);
      return 2;
    }
    if (e instanceof AppError && e.field) {
      err(`inferd: ${FLAG_OF[e.field] ?? e.field}: ${e.message.replace(/^[^:]*: /, "")}`);
      return 1;
    }
    throw e;
  }
}
