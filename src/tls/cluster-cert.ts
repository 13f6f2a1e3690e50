/**
 * The certificate every host of a cluster serves to agents: one identity for the cluster, kept in
 * the shared store, so a join token (which pins a fingerprint) works against any host and behind a
 * load balancer, and an agent's pin holds when it moves between hosts. The first host to start puts
 * its own data-dir certificate there (a store moved over from one host keeps that host's
 * certificate, and the pins of the agents already joined to it); the others serve that one.
 */
import { eq } from "drizzle-orm";
import type { Db } from "../db";
import { clusterCerts } from "../db/schema";
import { first } from "../db/raw";
import { fingerprintOf } from "./selfsigned";
import { HOST_CERT_NAME, type HostCert } from "./hostcert";

const ID = "host";

/** The cluster's certificate: the stored one, or `own` once stored (when none was). */
export async function clusterCert(db: Db, own: HostCert): Promise<HostCert> {
  await db
    .insert(clusterCerts)
    .values({ id: ID, certPem: own.certPem, keyPem: own.keyPem, createdAt: new Date().toISOString() })
    .onConflictDoNothing();
  const row = await first(db.select().from(clusterCerts).where(eq(clusterCerts.id, ID)));
  if (!row || row.certPem === own.certPem) return own;
  return {
    certPem: row.certPem,
    keyPem: row.keyPem,
    fingerprint: fingerprintOf(row.certPem),
    serverName: HOST_CERT_NAME,
  };
}
