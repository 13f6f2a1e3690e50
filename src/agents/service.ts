import { eq } from "drizzle-orm";
import { storeLookup } from "../db/memo";
import type { Db } from "../db";
import { first } from "../db/raw";
import { workers } from "../db/schema";
import { AppError, unauthorized } from "../errors";
import { newSecret, safeEqual, sha256 } from "../ids";
import { recordMachine } from "../workers/service";
import { setWorkerCredential } from "../workers/remote";
import type { MachineInfo } from "../../agent/protocol";

/** Prefix of an agent's credential. */
export const AGENT_CREDENTIAL_PREFIX = "iag_";

/**
 * A join token: `<worker_id>.<secret>.<sha256 of the host certificate>`. The fingerprint lets the
 * agent refuse a host whose certificate does not match (like kubeadm's discovery hash). A pool join
 * token (./join-tokens.ts) has the same form with its own id (`jt_…`) in the first place.
 */
export function parseJoinToken(token: string): { workerId: string; secret: string; fingerprint: string } | undefined {
  const [workerId, secret, fingerprint, extra] = token.split(".");
  if (!workerId || !secret || !/^[0-9a-f]{64}$/.test(fingerprint ?? "") || extra !== undefined) return undefined;
  return { workerId, secret, fingerprint };
}

/** Same major.minor: an agent and a host that differ more say so at join instead of failing oddly. */
export function compatible(a: string, b: string): boolean {
  const mm = (v: string) => v.split(/[.+-]/).slice(0, 2).join(".");
  return mm(a) === mm(b);
}

/** 409 `version_mismatch` unless the agent's version works with the host's (same major.minor). */
export function requireCompatible(version: string, hostVersion: string): void {
  if (!compatible(version, hostVersion)) {
    throw new AppError(
      409,
      "version_mismatch",
      `this host runs inferd ${hostVersion} and the agent runs ${version}: run the same version (major.minor) on both`,
    );
  }
}

/**
 * Redeems a worker's join token (once): checks the agent's version, records its machine, and returns
 * the credential it will use from now on (stored only as a hash). Pool tokens: ./join-tokens.ts.
 */
export async function joinWorker(
  db: Db,
  token: string,
  version: string,
  hostVersion: string,
  machine: MachineInfo,
): Promise<{ workerId: string; credential: string }> {
  const t = parseJoinToken(token);
  const row = t ? await first(db.select().from(workers).where(eq(workers.id, t.workerId))) : undefined;
  if (!t || !row || !row.joinTokenHash || !safeEqual(row.joinTokenHash, sha256(t.secret))) {
    throw unauthorized("invalid_join_token", "the join token is unknown, already used, or its worker was deleted");
  }
  requireCompatible(version, hostVersion);
  const credential = newSecret(AGENT_CREDENTIAL_PREFIX);
  await setWorkerCredential(db, row.id, { credentialHash: sha256(credential), joinTokenHash: null, version });
  await recordMachine(db, row.id, machine, version);
  return { workerId: row.id, credential };
}

/**
 * A fresh agent credential for this host's own machine, so the other hosts of a cluster let its
 * agent take work from them too (stored only as a hash; a restart issues a new one).
 */
export async function issueLocalCredential(db: Db, workerId: string): Promise<string> {
  const credential = newSecret(AGENT_CREDENTIAL_PREFIX);
  await setWorkerCredential(db, workerId, { credentialHash: sha256(credential) });
  return credential;
}

const workerByCredentialHash = storeLookup(
  (db, hash) => first(db.select().from(workers).where(eq(workers.credentialHash, hash))),
  ["workers"],
);

/** The remote worker an agent credential belongs to, or 401 (memoised until the store changes). */
export async function workerByCredential(db: Db, credential: string | undefined): Promise<typeof workers.$inferSelect> {
  const row = credential?.startsWith(AGENT_CREDENTIAL_PREFIX)
    ? await workerByCredentialHash(db, sha256(credential))
    : undefined;
  if (!row)
    throw unauthorized(
      "invalid_agent_credential",
      "this agent's credential is unknown: its worker was deleted from the host, or it never joined",
    );
  return row;
}
