/**
 * Join tokens for pools of agents: `POST /admin/workers/join-tokens` makes one that is reusable (a
 * Kubernetes DaemonSet, an autoscaling group: each agent that joins with it becomes a new worker)
 * or works once, and expires either way. Like a worker's one-time token it reads
 * `<id>.<secret>.<sha256 of the host certificate>`, so agents pin the host exactly as before; its id
 * (`jt_…`, where a worker's token has `wk_…`) tells the two apart. Only the secret's hash is stored.
 */
import { and, desc, eq, gt, isNull, or, sql } from "drizzle-orm";
import type { Db } from "../db";
import { first } from "../db/raw";
import { joinTokens, workers } from "../db/schema";
import { notFound, unauthorized } from "../errors";
import { newId, newSecret, nowIso, safeEqual, sha256 } from "../ids";
import { audit, withActor } from "../audit/service";
import { recordMachine } from "../workers/service";
import { addJoinedWorker } from "../workers/remote";
import type { MachineInfo } from "../../agent/protocol";
import { AGENT_CREDENTIAL_PREFIX, parseJoinToken, requireCompatible } from "./service";

/** The id prefix of a pool join token (a worker's one-time token starts with its worker id, `wk_…`). */
const ID_PREFIX = "jt";

/** How long a join token may live, in seconds: 1 minute to 1 year; 24 hours unless asked. */
export const JOIN_TOKEN_TTL = { minS: 60, maxS: 365 * 86_400, defaultS: 86_400 } as const;

type JoinTokenRow = typeof joinTokens.$inferSelect;

/** A join token as the admin API lists it: never its secret. */
export interface JoinTokenView {
  id: string;
  reusable: boolean;
  /** `active`, or why it no longer lets agents join. */
  state: "active" | "expired" | "revoked" | "used";
  expires_at: string;
  created_at: string;
  revoked_at: string | null;
  /** Agents that joined with it. */
  uses: number;
  last_used_at: string | null;
}

/** `active` while a token lets agents join, else why it no longer does. */
function stateOf(row: JoinTokenRow, now: string): JoinTokenView["state"] {
  if (row.revokedAt) return "revoked";
  if (row.expiresAt <= now) return "expired";
  if (!row.reusable && row.uses > 0) return "used";
  return "active";
}

const view = (row: JoinTokenRow, now = nowIso()): JoinTokenView => ({
  id: row.id,
  reusable: row.reusable,
  state: stateOf(row, now),
  expires_at: row.expiresAt,
  created_at: row.createdAt,
  revoked_at: row.revokedAt,
  uses: row.uses,
  last_used_at: row.lastUsedAt,
});

/** Whether `token` is a pool join token (made by `createJoinToken`) rather than a worker's own. */
export const isPoolToken = (token: string): boolean =>
  parseJoinToken(token)?.workerId.startsWith(`${ID_PREFIX}_`) ?? false;

/**
 * Makes a join token (shown once in the answer): reusable or one-time, valid for `expiresInS`
 * seconds, pinning the host certificate `fingerprint`.
 * @example await createJoinToken(db, { reusable: true, expiresInS: 3600 }, cert.fingerprint) // → { token: "jt_….….<sha256>", … }
 */
export async function createJoinToken(
  db: Db,
  opts: { reusable: boolean; expiresInS: number },
  fingerprint: string,
): Promise<JoinTokenView & { token: string }> {
  const id = newId(ID_PREFIX);
  const secret = newSecret("");
  const createdAt = nowIso();
  const expiresAt = new Date(Date.parse(createdAt) + opts.expiresInS * 1000).toISOString();
  await db.insert(joinTokens).values({ id, secretHash: sha256(secret), reusable: opts.reusable, expiresAt, createdAt });
  await audit(db, "join_token.create", { type: "join_token", id }, { reusable: opts.reusable, expires_at: expiresAt });
  return {
    ...view((await first(db.select().from(joinTokens).where(eq(joinTokens.id, id))))!),
    token: `${id}.${secret}.${fingerprint}`,
  };
}

/** Every join token, newest first (no secrets). */
export async function listJoinTokens(db: Db): Promise<JoinTokenView[]> {
  const now = nowIso();
  return (await db.select().from(joinTokens).orderBy(desc(joinTokens.createdAt))).map((r) => view(r, now));
}

/** Revokes a join token: no agent joins with it from now on (workers that joined keep working). */
export async function revokeJoinToken(db: Db, id: string): Promise<JoinTokenView> {
  await db
    .update(joinTokens)
    .set({ revokedAt: sql`coalesce(${joinTokens.revokedAt}, ${nowIso()})` })
    .where(eq(joinTokens.id, id));
  const row = await first(db.select().from(joinTokens).where(eq(joinTokens.id, id)));
  if (!row) throw notFound(`join token "${id}"`);
  await audit(db, "join_token.revoke", { type: "join_token", id });
  return view(row);
}

/** Why a token that matched cannot be used now, in the agent's words. */
const REFUSALS: Record<Exclude<JoinTokenView["state"], "active">, (row: JoinTokenRow) => string> = {
  expired: (r) => `this join token expired at ${r.expiresAt}: make a new one with POST /admin/workers/join-tokens`,
  revoked: (r) => `this join token was revoked at ${r.revokedAt}: make a new one with POST /admin/workers/join-tokens`,
  used: () =>
    "this one-time join token was already used: make a new one (or a reusable one) with POST /admin/workers/join-tokens",
};

/** A worker name from the machine's host name: the host name itself, or with a suffix when another worker has it. */
async function freeWorkerName(db: Db, hostname: string, id: string): Promise<string> {
  const base =
    hostname
      .replace(/[^A-Za-z0-9._-]/g, "-")
      .replace(/^[^A-Za-z0-9]+/, "")
      .slice(0, 90) || "worker";
  for (const name of [base, `${base}-${id.slice(-4)}`, `${base}-${id.slice(-8)}`]) {
    if (!(await first(db.select({ id: workers.id }).from(workers).where(eq(workers.name, name))))) return name;
  }
  return `${base}-${id.slice(3)}`;
}

/**
 * Redeems a pool join token: checks it (401 `invalid_join_token` when unknown, expired, revoked or,
 * for a one-time token, used) and the agent's version, then makes a new remote worker named after
 * the agent's machine and returns its credential (stored only as a hash).
 */
export async function joinWithPoolToken(
  db: Db,
  token: string,
  version: string,
  hostVersion: string,
  machine: MachineInfo,
): Promise<{ workerId: string; credential: string }> {
  const t = parseJoinToken(token);
  const row =
    t && isPoolToken(token)
      ? await first(db.select().from(joinTokens).where(eq(joinTokens.id, t.workerId)))
      : undefined;
  if (!t || !row || !safeEqual(row.secretHash, sha256(t.secret))) {
    throw unauthorized(
      "invalid_join_token",
      "the join token is unknown to this host: make one with POST /admin/workers/join-tokens",
    );
  }
  const now = nowIso();
  const state = stateOf(row, now);
  if (state !== "active") throw unauthorized("invalid_join_token", REFUSALS[state](row));
  requireCompatible(version, hostVersion);
  // Counted in one conditional write, so a one-time token lets exactly one agent in, whichever host it asks.
  const taken = await db
    .update(joinTokens)
    .set({ uses: sql`${joinTokens.uses} + 1`, lastUsedAt: now })
    .where(
      and(
        eq(joinTokens.id, row.id),
        isNull(joinTokens.revokedAt),
        gt(joinTokens.expiresAt, now),
        or(eq(joinTokens.reusable, true), eq(joinTokens.uses, 0)),
      ),
    )
    .returning({ id: joinTokens.id });
  if (taken.length === 0) throw unauthorized("invalid_join_token", REFUSALS.used(row));
  const id = newId("wk");
  const name = await freeWorkerName(db, machine.hostname, id);
  const credential = newSecret(AGENT_CREDENTIAL_PREFIX);
  await addJoinedWorker(db, {
    id,
    name,
    hostname: machine.hostname,
    credentialHash: sha256(credential),
    version,
    createdAt: now,
  });
  await recordMachine(db, id, machine, version);
  await withActor({ type: "system", id: row.id, label: `join token ${row.id}` }, () =>
    audit(db, "worker.create", { type: "worker", id, label: name }, { name, kind: "remote", join_token_id: row.id }),
  );
  return { workerId: id, credential };
}
