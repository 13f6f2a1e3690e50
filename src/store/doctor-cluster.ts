/**
 * The cluster's lines of `inferd doctor` in PostgreSQL mode: what the hosts sharing the database
 * say about each other (which hosts beat recently, who leads, versions and certificates that
 * differ). `runDoctor` calls this after the connection, version and migrations checks pass, with
 * the database open and migrated. Reads only.
 */
import { HOST_TIMEOUT_MS, listHosts, type HostView } from "../cluster/hosts";
import { LEADER_LOCK } from "../cluster/leader";
import { hosts } from "../db/schema";
import type { Store } from "../db";
import { ago } from "./check";
import { check, type Check } from "./report";

/** How long ago a heartbeat was, in seconds while recent. */
const seen = (ms: number) => (ms < 120_000 ? `${Math.max(0, Math.round(ms / 1000))} s ago` : ago(ms));

/** A host as a doctor line names it. */
const named = (h: HostView, now: number) =>
  `${h.name} (${h.id}, ${h.version}, seen ${seen(now - Date.parse(h.last_seen_at))})`;

/** Checks of the cluster that shares this PostgreSQL store: hosts and their heartbeats, the leader, versions, certificates. */
export async function clusterChecks(store: Store, now = Date.now()): Promise<Check[]> {
  const all = await listHosts(store.db, now);
  const alive = all.filter((h) => h.alive);
  const gone = all.filter((h) => !h.alive);
  const out: Check[] = [];
  if (!alive.length) {
    out.push(
      check(
        "hosts",
        "warn",
        all.length
          ? `no host is running on this database (last seen: ${gone.map((h) => named(h, now)).join("; ")})`
          : "no host has run on this database yet",
        "start one with inferd serve --database-url …",
      ),
    );
    return out;
  }
  const goneText = gone.length
    ? `; not heard from for over ${HOST_TIMEOUT_MS / 1000} s: ${gone.map((h) => named(h, now)).join("; ")}`
    : "";
  out.push(
    check(
      "hosts",
      gone.length ? "warn" : "ok",
      `${alive.length} running: ${alive.map((h) => named(h, now)).join("; ")}${goneText}`,
      gone.length
        ? "a host that stopped without saying so (crash, kill -9, lost network): its running jobs went back to the queue; it is forgotten after a day"
        : undefined,
    ),
  );
  // Who holds the leader's advisory lock, and which host says it leads.
  const [{ held }] = [
    ...((await store.pg!.unsafe(
      `SELECT count(*)::int AS held FROM pg_locks WHERE locktype = 'advisory' AND objid = ${LEADER_LOCK} AND objsubid = 1 AND granted`,
    )) as { held: number }[]),
  ];
  const since = new Map(
    (await store.db.select({ id: hosts.id, since: hosts.leadingSince }).from(hosts)).map((r) => [r.id, r.since]),
  );
  const leader = alive.find((h) => since.get(h.id));
  if (held && leader)
    out.push(
      check(
        "leader",
        "ok",
        `${leader.name} (${leader.id}) leads since ${since.get(leader.id)}: placement, scaling, webhook retries, retention`,
      ),
    );
  else if (held) out.push(check("leader", "ok", "a host holds the lead (it is taking it up now)"));
  else
    out.push(
      check(
        "leader",
        "fail",
        "no host leads: nothing places workloads, scales or retries webhooks",
        "hosts take the lead within seconds; if this stays, check the hosts' logs and that they reach this database",
      ),
    );
  const versions = new Set(alive.map((h) => h.version));
  if (versions.size > 1)
    out.push(
      check(
        "versions",
        "warn",
        `the hosts run different versions: ${alive.map((h) => `${h.name} ${h.version}`).join(", ")}`,
        "run one version on every host (upgrade one host at a time, then the rest)",
      ),
    );
  const prints = new Set(alive.map((h) => h.fingerprint));
  if (prints.size > 1)
    out.push(
      check(
        "certificates",
        "warn",
        `the hosts serve ${prints.size} different certificates to agents`,
        "a join token pins one certificate: give every host the same --tls-cert/--tls-key (or none, and they share the cluster's)",
      ),
    );
  return out;
}
