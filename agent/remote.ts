import { connect } from "node:tls";
import { createHash, X509Certificate } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { HostLink } from "./agent";
import { LogRing } from "./ring";
import { AGENT_LIMITS, type MachineInfo, type ReplicaReport, type ReplicaSpec } from "./protocol";

/** A host of the cluster an agent takes work from: where it is reached and the certificate to pin. */
export interface PeerHost {
  id: string;
  agent_url: string;
  fingerprint: string;
}

/**
 * What an agent keeps after joining: where its host is, the pinned certificate and its credential,
 * and (in a cluster) the other hosts it last heard of, so it finds them even while its own is down.
 */
export interface AgentState {
  host_url: string;
  worker_id: string;
  credential: string;
  host_cert_pem: string;
  server_name: string;
  /** The id of the host joined (in a cluster, one of several). */
  host_id?: string;
  peers?: PeerHost[];
}

/** Saves the join state (mode 0600). */
export function saveAgentState(dataDir: string, state: AgentState): void {
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  writeFileSync(stateFile(dataDir), JSON.stringify(state, null, 2), { mode: 0o600 });
  chmodSync(stateFile(dataDir), 0o600);
}

/** A failure the agent cannot get past by retrying (revoked credential, version mismatch, bad pin). */
export class AgentFatal extends Error {}

const stateFile = (dataDir: string) => join(dataDir, "agent.json");

/** The saved join state, or undefined before the first join. */
export function loadAgentState(dataDir: string): AgentState | undefined {
  const f = stateFile(dataDir);
  return existsSync(f) ? (JSON.parse(readFileSync(f, "utf8")) as AgentState) : undefined;
}

/** Reads the host's certificate over TLS without trusting it yet (it is checked against the pin next). */
export function peerCertificate(url: URL): Promise<{ pem: string; fingerprint: string; serverName: string }> {
  return new Promise((resolve, reject) => {
    const sock = connect(
      {
        host: url.hostname.replace(/^\[|\]$/g, ""),
        port: Number(url.port || 443),
        rejectUnauthorized: false,
        servername: "inferd.host",
      },
      () => {
        const raw = sock.getPeerCertificate(true)?.raw as Buffer | undefined;
        sock.end();
        if (!raw) return reject(new Error("the host presented no certificate"));
        const pem = `-----BEGIN CERTIFICATE-----\n${raw
          .toString("base64")
          .match(/.{1,64}/g)!
          .join("\n")}\n-----END CERTIFICATE-----\n`;
        const dns = /DNS:([^,\s]+)/.exec(new X509Certificate(pem).subjectAltName ?? "")?.[1] ?? "inferd.host";
        resolve({ pem, fingerprint: createHash("sha256").update(raw).digest("hex"), serverName: dns });
      },
    );
    sock.setTimeout(10_000, () => sock.destroy(new Error("timed out reaching the host")));
    sock.once("error", reject);
  });
}

/**
 * The state of a link to another host of the cluster: the same worker and credential, that host's
 * certificate fetched and checked against the fingerprint the cluster gave (over an already pinned link).
 */
export async function peerState(
  base: Pick<AgentState, "worker_id" | "credential">,
  peer: PeerHost,
): Promise<AgentState> {
  const url = new URL(peer.agent_url);
  const cert = await peerCertificate(url);
  if (cert.fingerprint !== peer.fingerprint)
    throw new Error(
      `host ${peer.id} at ${url.origin} presented certificate sha256 ${cert.fingerprint}, not the cluster's ${peer.fingerprint}: not taking work from it`,
    );
  return {
    host_url: url.origin,
    worker_id: base.worker_id,
    credential: base.credential,
    host_cert_pem: cert.pem,
    server_name: cert.serverName,
    host_id: peer.id,
  };
}

/**
 * Joins a host with a join token: refuses a host whose certificate does not match the token's pin,
 * registers with the host (which checks versions), and saves the credential (mode 0600).
 */
export async function joinHost(
  hostUrl: string,
  token: string,
  dataDir: string,
  version: string,
  machine: MachineInfo,
): Promise<AgentState> {
  const pin = token.split(".")[2];
  if (!pin || !/^[0-9a-f]{64}$/.test(pin))
    throw new AgentFatal("this is not a join token (get one from the host's dashboard: Workers → Add worker)");
  const url = new URL(hostUrl);
  if (url.protocol !== "https:")
    throw new AgentFatal("join the host's HTTPS address (https://host:port, as the join command shows)");
  const peer = await peerCertificate(url);
  if (peer.fingerprint !== pin) {
    throw new AgentFatal(
      `the host's certificate (sha256 ${peer.fingerprint}) does not match the join token (sha256 ${pin}): refusing to join — check the address, or get a new join command`,
    );
  }
  const r = await fetch(new URL("/agent/v1/join", url), {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ token, version, machine }),
    tls: { ca: peer.pem, serverName: peer.serverName },
  } as RequestInit);
  const body = (await r.json().catch(() => ({}))) as {
    worker_id?: string;
    credential?: string;
    host_id?: string;
    hosts?: PeerHost[];
    error?: { message?: string };
  };
  if (!r.ok)
    throw new AgentFatal(`the host refused to let this agent join: ${body.error?.message ?? `HTTP ${r.status}`}`);
  const state: AgentState = {
    host_url: url.origin,
    worker_id: body.worker_id!,
    credential: body.credential!,
    host_cert_pem: peer.pem,
    server_name: peer.serverName,
    host_id: body.host_id,
    peers: (body.hosts ?? []).filter((h) => h.id !== body.host_id),
  };
  saveAgentState(dataDir, state);
  return state;
}

/**
 * The link of a remote agent to its host over HTTPS, with the host's certificate pinned: heartbeats
 * carry telemetry and every replica's state, a long poll learns what to run, logs are sent in batches.
 */
export class RemoteHostLink implements HostLink {
  private reports = new Map<string, ReplicaReport>();
  private listeners = new Set<() => void>();
  private rings = new Map<string, LogRing>();
  private pendingLogs: { assignment_id: string; data_b64: string }[] = [];
  private revision = "";
  private stopped = false;
  private logTimer: ReturnType<typeof setInterval>;

  constructor(
    private state: AgentState,
    private version: string,
    private onFatal: (e: AgentFatal) => void,
    /** Told the host's id and every live host of its cluster after each heartbeat. */
    private onHosts: (hostId: string | undefined, hosts: PeerHost[]) => void = () => {},
  ) {
    this.logTimer = setInterval(() => void this.flushLogs(), 300);
    void this.watchDesired();
  }

  /** An authenticated, pinned request to the host; 401 means this worker was deleted. */
  async call(path: string, init: RequestInit & { timeoutMs?: number } = {}): Promise<Response> {
    const r = await fetch(this.state.host_url + path, {
      ...init,
      headers: {
        authorization: `Bearer ${this.state.credential}`,
        ...(init.body && typeof init.body === "string" ? { "content-type": "application/json" } : {}),
        ...(init.headers as Record<string, string>),
      },
      tls: { ca: this.state.host_cert_pem, serverName: this.state.server_name },
      signal: init.signal ?? AbortSignal.timeout(init.timeoutMs ?? 15_000),
    } as RequestInit);
    if (r.status === 401) {
      const fatal = new AgentFatal(
        "this worker was deleted from the host (its credential no longer works): stopping its runtimes",
      );
      this.onFatal(fatal);
      throw fatal;
    }
    return r;
  }

  async register(machine: MachineInfo): Promise<string> {
    await this.heartbeat(this.state.worker_id, machine);
    return this.state.worker_id;
  }

  async heartbeat(_workerId: string, machine: MachineInfo): Promise<void> {
    try {
      const r = await this.call("/agent/v1/heartbeat", {
        method: "POST",
        body: JSON.stringify({ version: this.version, machine, replicas: [...this.reports.values()] }),
      });
      const body = (await r.json().catch(() => ({}))) as { host_id?: string; hosts?: PeerHost[] };
      if (r.ok && body.hosts) this.onHosts(body.host_id, body.hosts);
    } catch {
      // The host is away: the next heartbeat tries again (a cluster's other hosts still get theirs).
    }
  }

  /** Which host this link reaches. */
  get url(): string {
    return this.state.host_url;
  }

  async desired(): Promise<ReplicaSpec[]> {
    const r = await this.call("/agent/v1/desired");
    const body = (await r.json()) as { revision: string; replicas: ReplicaSpec[] };
    this.revision = body.revision;
    return body.replicas;
  }

  /** Long-polls the host for changes to what this agent should run, and wakes the reconcile. */
  private async watchDesired(): Promise<void> {
    while (!this.stopped) {
      try {
        const r = await this.call(`/agent/v1/desired?rev=${this.revision}&wait=25000`, { timeoutMs: 40_000 });
        const body = (await r.json()) as { revision: string };
        // Kept here too: a link to another host of a cluster is never asked for `desired()`, and
        // with its revision unknown every poll would answer at once (a busy loop).
        if (body.revision !== this.revision) {
          this.revision = body.revision;
          for (const cb of this.listeners) cb();
        }
      } catch {
        if (!this.stopped) await Bun.sleep(1000);
      }
    }
  }

  report(_workerId: string, r: ReplicaReport): void {
    if (r.state === "stopped") this.reports.delete(r.assignment_id);
    else this.reports.set(r.assignment_id, r);
    void this.call("/agent/v1/report", { method: "POST", body: JSON.stringify(r) }).catch(() => {});
  }

  /** The latest report of a replica (its runtime URL once ready). */
  replica(assignmentId: string): ReplicaReport | undefined {
    return this.reports.get(assignmentId);
  }

  ringFor(id: string): LogRing {
    let ring = this.rings.get(id);
    if (!ring) {
      ring = new LogRing();
      ring.subscribe((chunk) => this.queueLog(id, chunk));
      this.rings.set(id, ring);
    }
    return ring;
  }

  /** Queues a chunk of a replica's output for this host (sent in batches). */
  queueLog(id: string, chunk: Uint8Array): void {
    this.pendingLogs.push({ assignment_id: id, data_b64: Buffer.from(chunk).toString("base64") });
  }

  /** Sends waiting log chunks, as many as fit in one message the host accepts (AGENT_LIMITS). */
  private async flushLogs(): Promise<void> {
    if (this.pendingLogs.length === 0) return;
    let n = 0;
    for (let bytes = 0; n < Math.min(this.pendingLogs.length, AGENT_LIMITS.logChunks); n++) {
      bytes += this.pendingLogs[n].data_b64.length + 64;
      if (bytes > AGENT_LIMITS.messageBytes / 2 && n > 0) break;
    }
    const chunks = this.pendingLogs.splice(0, n);
    await this.call("/agent/v1/logs", { method: "POST", body: JSON.stringify({ chunks }) }).catch(() => {});
  }

  subscribe(cb: () => void): () => void {
    this.listeners.add(cb);
    return () => this.listeners.delete(cb);
  }

  /** Stops the background loops. */
  stop(): void {
    this.stopped = true;
    clearInterval(this.logTimer);
  }
}
