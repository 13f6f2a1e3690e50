/**
 * Remote workers' rows: registered, joined, given credentials and deleted here (the workers table is
 * this folder's); the agents' join tokens and credentials (src/agents/) call these.
 */
import { eq } from "drizzle-orm";
import type { Db } from "../db";
import { first } from "../db/raw";
import { workers } from "../db/schema";
import { conflict } from "../errors";
import { newId, newSecret, nowIso, sha256 } from "../ids";
import { audit } from "../audit/service";
import { getWorker, workerView } from "./service";

/** Registers a remote worker and returns its one-time join token. */
export async function createRemoteWorker(
  db: Db,
  name: string,
  fingerprint: string,
): Promise<{ worker: ReturnType<typeof workerView>; token: string }> {
  if (await first(db.select({ id: workers.id }).from(workers).where(eq(workers.name, name))))
    throw conflict(`a worker named "${name}" exists`, "name_taken");
  const id = newId("wk");
  const secret = newSecret("");
  await db.insert(workers).values({ id, name, kind: "remote", joinTokenHash: sha256(secret), createdAt: nowIso() });
  await audit(db, "worker.create", { type: "worker", id, label: name }, { name, kind: "remote" });
  return { worker: workerView(await getWorker(db, id)), token: `${id}.${secret}.${fingerprint}` };
}

/** A remote worker that joined with a pool token: its row, with the hash of the credential it was given. */
export async function addJoinedWorker(
  db: Db,
  w: { id: string; name: string; hostname: string; credentialHash: string; version: string; createdAt: string },
): Promise<void> {
  await db.insert(workers).values({ ...w, kind: "remote" });
}

/** Stores a worker's new credential (as a hash), and what joining changes beside it. */
export async function setWorkerCredential(
  db: Db,
  id: string,
  set: { credentialHash: string; joinTokenHash?: null; version?: string },
): Promise<void> {
  await db.update(workers).set(set).where(eq(workers.id, id));
}

/** Deletes a remote worker: its credential stops working at once. The local worker cannot be deleted. */
export async function deleteRemoteWorker(db: Db, id: string): Promise<ReturnType<typeof workerView>> {
  const row = await getWorker(db, id);
  if (row.kind === "local")
    throw conflict("the local worker is this machine; stop it with --no-local-agent instead", "local_worker");
  await db.delete(workers).where(eq(workers.id, id));
  await audit(db, "worker.delete", { type: "worker", id, label: row.name });
  return workerView(row);
}
