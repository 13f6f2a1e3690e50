import type { RemoteHostLink } from "./remote";
import type { ReplicaReport, WorkMessage } from "./protocol";
import { notServed, runtimePath } from "./engines/custom";

/**
 * Why the agent answered a request itself (the `x-inferd-failure` header): the runtime could not be
 * reached, or the replica is not ready here. The host then treats it as a lost run, not as the
 * runtime's own answer, so the request or job can run again. Its body is a short JSON error
 * (at most AGENT_LIMITS.failureBytes).
 */
export type AgentFailure = "upstream_unavailable" | "replica_not_ready";

let session: string | undefined;

/**
 * This agent process's id, sent with every poll for work: when a process dies and the next one of
 * the same worker polls, the host fails what the dead one took and never answered (it runs
 * elsewhere) instead of waiting for the worker timeout, which a quick restart never reaches.
 */
export function agentSession(): string {
  return (session ??= crypto.randomUUID());
}

/**
 * Pulls requests for this agent's replicas from the host (long poll; a new poll goes out as soon as
 * one returns) and runs each against its runtime on loopback, streaming the answer back as it comes
 * (the upload is the runtime's body, chunk by chunk). A client that leaves ends the upload, which
 * aborts the runtime request.
 */
export class WorkPuller {
  private stopped = false;
  private abort = new AbortController();
  private running = new Set<Promise<void>>();

  constructor(
    private link: Pick<RemoteHostLink, "call">,
    /** The agent's latest report of a replica (its runtime URL once ready). */
    private replicaOf: (assignmentId: string) => ReplicaReport | undefined,
  ) {}

  /** Starts pulling; returns at once. */
  start(): void {
    void this.loop();
  }

  private async loop(): Promise<void> {
    while (!this.stopped) {
      try {
        const r = await this.link.call(`/agent/v1/work?wait=25000&session=${agentSession()}`, {
          timeoutMs: 40_000,
          signal: this.abort.signal,
        });
        const { items } = (await r.json()) as { items: WorkMessage[] };
        for (const item of items) {
          const p = this.run(item).finally(() => this.running.delete(p));
          this.running.add(p);
        }
      } catch {
        if (!this.stopped) await Bun.sleep(500);
      }
    }
  }

  /** Streams an answer to the host; `failure` marks one the agent made itself because the runtime gave none. */
  private async respond(
    id: string,
    status: number,
    contentType: string,
    body: BodyInit | null,
    failure?: AgentFailure,
  ): Promise<number> {
    const r = await this.link.call(`/agent/v1/work/${id}/response`, {
      method: "POST",
      headers: {
        "x-inferd-status": String(status),
        "x-inferd-content-type": contentType,
        ...(failure ? { "x-inferd-failure": failure } : {}),
      },
      body,
      timeoutMs: 24 * 3600_000,
    });
    return ((await r.json().catch(() => ({ status: r.status }))) as { status: number }).status;
  }

  private async run(item: WorkMessage): Promise<void> {
    const replica = this.replicaOf(item.assignment_id);
    const upstream = new AbortController();
    this.abort.signal.addEventListener("abort", () => upstream.abort(), { once: true });
    if (!replica?.base_url || replica.state !== "ready") {
      await this.respond(
        item.id,
        503,
        "application/json",
        JSON.stringify({ error: { code: "replica_not_ready", message: "the replica is not ready on this worker" } }),
        "replica_not_ready",
      ).catch(() => {});
      return;
    }
    // A custom server serves only its routes, each at its own path (./engines/custom.ts).
    const path = runtimePath(replica.paths, item.path);
    let res: Response;
    try {
      res =
        path === null
          ? notServed()
          : await fetch(replica.base_url + path, {
              method: item.method,
              headers: replica.api_key ? { ...item.headers, authorization: `Bearer ${replica.api_key}` } : item.headers,
              body: item.body_b64 === null ? undefined : Buffer.from(item.body_b64, "base64"),
              signal: upstream.signal,
            });
    } catch (e) {
      const msg = JSON.stringify({
        error: { code: "upstream_unavailable", message: `the model runtime did not answer: ${(e as Error).message}` },
      });
      await this.respond(item.id, 502, "application/json", msg, "upstream_unavailable").catch(() => {});
      return;
    }
    try {
      const outcome = await this.respond(
        item.id,
        res.status,
        res.headers.get("content-type") ?? "application/octet-stream",
        res.body,
      );
      if (outcome !== 200) upstream.abort();
    } catch {
      upstream.abort();
    }
  }

  /** Stops pulling and aborts requests in flight. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.abort.abort();
    await Promise.allSettled([...this.running]);
  }
}
