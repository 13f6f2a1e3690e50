/** The hosts of a cluster (inferd serve processes sharing one PostgreSQL): who leads, heartbeats. */
import { html } from "htm/preact";
import { ago, plural } from "../lib/format";
import type { Cluster } from "../lib/types";
import { StateBadge } from "./ui";

/** How the overview names the cluster: `cluster of 2 hosts, led by gpu-a`. */
export function clusterLine(c: Cluster | undefined): string | null {
  if (!c || c.mode !== "cluster") return null;
  const running = c.hosts.filter((h) => h.alive).length;
  return `cluster of ${plural(running, "host")}, ${c.leader ? `led by ${c.leader.name}` : "no leader yet"}`;
}

/** Each host with its address, version, last heartbeat and whether it leads; nothing in the embedded store. */
export function Hosts({ cluster, now }: { cluster: Cluster | undefined; now: number }) {
  if (!cluster || cluster.mode !== "cluster") return null;
  return html`<section class="hosts" aria-labelledby="hosts"><h2 id="hosts">Hosts</h2>
    <p class="muted">The inferd servers sharing this database. Any host answers the API and this dashboard; the leader places workloads, scales them and retries webhooks, and another host takes over within seconds when it stops.</p>
    ${cluster.leader ? null : html`<p role="alert" class="error">No host leads right now: placement, scaling and webhook retries wait until one does.</p>`}
    <div class="table-wrap"><table aria-label="Hosts">
      <thead><tr><th scope="col">Host</th><th scope="col">Address</th><th scope="col">Version</th><th scope="col">Heartbeat</th><th scope="col">State</th></tr></thead>
      <tbody>${cluster.hosts.map(
        (h) => html`<tr key=${h.id} data-testid="host">
        <td><strong>${h.name}</strong>${h.leading ? html` <span class="badge state-ready">leader</span>` : null}${h.id === cluster.host_id ? html` <span class="muted">(this dashboard)</span>` : null}<div class="muted small-text">${h.id}</div></td>
        <td><a href=${h.url}>${h.url}</a></td>
        <td>${h.version}</td>
        <td title=${h.last_seen_at}>${ago(h.last_seen_at, now)}</td>
        <td><${StateBadge} state=${h.alive ? "online" : "offline"} /></td>
      </tr>`,
      )}</tbody>
    </table></div>
  </section>`;
}
