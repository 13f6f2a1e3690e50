import { AppError } from "../errors";
import type { Target, Upstream } from "../dispatch/queue";
import { uploadBytesFor } from "../multipart";
import { runtimeText } from "../workers/fleet";
import type { ReplicaReport, WorkMessage } from "../../agent/protocol";

/** A request lost with its worker before any of its answer reached the client: safe to run elsewhere. */
export class WorkerLost extends AppError {
  constructor(why: string) {
    super(503, "worker_lost", why, { "retry-after": "1" });
  }
}

interface Item {
  msg: WorkMessage;
  workerId: string;
  picked: boolean;
  /** The agent process that took it (its poll's `session`). */
  session?: string;
  started: boolean;
  cancelled: boolean;
  resolve(r: Response): void;
  reject(e: Error): void;
  /** Aborts a running pump when the worker is lost mid-answer. */
  pump?: AbortController;
}

const enc = new TextEncoder();

/**
 * The host's side of remote agents: per worker, a queue of requests the agent pulls with long
 * polls, and the answers it streams back, piped to the waiting clients chunk by chunk.
 */
export class AgentHub {
  private queues = new Map<string, Item[]>();
  private waiters = new Map<string, Set<() => void>>();
  private items = new Map<string, Item>();
  /** The agent process polling for each worker now. */
  private sessions = new Map<string, string>();

  /** A dispatcher target for a remote replica: requests go to its agent. */
  target(workerId: string, report: ReplicaReport, concurrency: number, workloadId: string): Target {
    return {
      id: report.assignment_id,
      workloadId,
      workerId,
      capacity: concurrency,
      inFlight: 0,
      send: (req, signal) => this.submit(workerId, report, req, signal),
    };
  }

  private wake(workerId: string): void {
    for (const w of this.waiters.get(workerId) ?? []) w();
  }

  private async submit(workerId: string, report: ReplicaReport, req: Upstream, signal: AbortSignal): Promise<Response> {
    // The agent gets the body inside its work message: an upload is read whole here (and kept).
    const body = req.json
      ? enc.encode(runtimeText(req, req.json, report.served_model))
      : req.body
        ? uploadBytesFor(req, req.body, report.served_model)
        : req.source
          ? uploadBytesFor(req, await req.source.bytes(), report.served_model)
          : null;
    return new Promise<Response>((resolve, reject) => {
      const item: Item = {
        msg: {
          id: crypto.randomUUID(),
          assignment_id: report.assignment_id,
          path: req.path,
          method: req.method,
          headers: req.headers,
          body_b64: body ? Buffer.from(body).toString("base64") : null,
        },
        workerId,
        picked: false,
        started: false,
        cancelled: false,
        resolve,
        reject,
      };
      signal.addEventListener(
        "abort",
        () => {
          if (item.started) return item.pump?.abort();
          item.cancelled = true;
          this.drop(item);
          reject(new AppError(499, "client_closed", "the client went away"));
        },
        { once: true },
      );
      this.items.set(item.msg.id, item);
      const q = this.queues.get(workerId) ?? [];
      q.push(item);
      this.queues.set(workerId, q);
      this.wake(workerId);
    });
  }

  private drop(item: Item): void {
    this.items.delete(item.msg.id);
    const q = this.queues.get(item.workerId);
    const i = q?.indexOf(item) ?? -1;
    if (q && i >= 0) q.splice(i, 1);
  }

  /**
   * Long poll of an agent: the requests waiting for it, as soon as there are any (or [] after
   * `waitMs`). `session` is the polling agent process's id: a new one means the process that took
   * the requests still unanswered died, so those fail with WorkerLost and run elsewhere.
   */
  async poll(workerId: string, waitMs: number, signal: AbortSignal, session?: string): Promise<WorkMessage[]> {
    if (session) this.newSession(workerId, session);
    const take = () => {
      const q = this.queues.get(workerId) ?? [];
      this.queues.set(workerId, []);
      for (const it of q) {
        it.picked = true;
        it.session = session;
      }
      return q.map((it) => it.msg);
    };
    if ((this.queues.get(workerId)?.length ?? 0) > 0) return take();
    await new Promise<void>((resolve) => {
      const set = this.waiters.get(workerId) ?? new Set();
      const done = () => {
        clearTimeout(timer);
        set.delete(done);
        resolve();
      };
      const timer = setTimeout(done, waitMs);
      signal.addEventListener("abort", done, { once: true });
      set.add(done);
      this.waiters.set(workerId, set);
    });
    return signal.aborted ? [] : take();
  }

  /** Notes the worker's polling process; when it is another one, fails what the earlier one took and has not begun answering. */
  private newSession(workerId: string, session: string): void {
    const before = this.sessions.get(workerId);
    this.sessions.set(workerId, session);
    if (before === undefined || before === session) return;
    for (const item of [...this.items.values()]) {
      if (item.workerId !== workerId || !item.picked || item.started || item.session === session) continue;
      this.drop(item);
      item.reject(new WorkerLost("the worker's agent restarted before answering this request"));
    }
  }

  /** Whether `id` is a request handed to this worker and still waiting for its answer. */
  holds(workerId: string, id: string): boolean {
    return this.items.get(id)?.workerId === workerId;
  }

  /**
   * An agent's answer to one request: resolves the waiting client with the runtime's status and
   * content type, then pipes the body through as it arrives. Returns the status for the agent:
   * 200 when all of it was passed on, 499 when the client went away, 404 for an unknown request.
   */
  async respond(
    workerId: string,
    id: string,
    status: number,
    contentType: string,
    body: ReadableStream<Uint8Array> | null,
  ): Promise<number> {
    const item = this.items.get(id);
    if (!item || item.workerId !== workerId) return 404;
    if (item.cancelled) return 499;
    item.started = true;
    item.pump = new AbortController();
    const { readable, writable } = new TransformStream<Uint8Array, Uint8Array>();
    item.resolve(new Response(readable, { status, headers: { "content-type": contentType } }));
    const writer = writable.getWriter();
    const reader = body?.getReader();
    const lost = new Promise<"lost">((r) =>
      item.pump!.signal.addEventListener("abort", () => r("lost"), { once: true }),
    );
    try {
      for (;;) {
        const next = reader ? await Promise.race([reader.read(), lost]) : { done: true as const, value: undefined };
        if (next === "lost") throw new Error("the worker running this request went away");
        if (next.done) break;
        await writer.write(next.value);
      }
      await writer.close();
      return 200;
    } catch (e) {
      const clientGone = writer.desiredSize === null || item.cancelled;
      reader?.cancel().catch(() => {});
      if (!clientGone && contentType.includes("text/event-stream")) {
        const err = {
          error: {
            message: `the worker running this request went away mid-answer (${(e as Error).message})`,
            type: "server_error",
            code: "worker_lost",
          },
        };
        await writer.write(enc.encode(`data: ${JSON.stringify(err)}\n\n`)).catch(() => {});
        // End the stream cleanly after its error event: aborting it would discard the event unread
        // and reset the client's connection instead.
        await writer.close().catch(() => {});
      } else await writer.abort(e).catch(() => {});
      return clientGone ? 499 : 502;
    } finally {
      this.items.delete(id);
    }
  }

  /**
   * The agent could not run a request (`failure`: its runtime did not answer, or the replica is not
   * ready there): the request fails as a lost run — 502 `upstream_unavailable`, or WorkerLost so it
   * runs on another replica — rather than passing the agent's own error on as the runtime's answer
   * (which would fail an async job for good). Returns the status for the agent, as `respond` does.
   */
  fail(workerId: string, id: string, failure: string, body: string): number {
    const item = this.items.get(id);
    if (!item || item.workerId !== workerId) return 404;
    if (item.cancelled) return 499;
    this.drop(item);
    let message = `the worker could not run this request (${failure})`;
    try {
      message = (JSON.parse(body) as { error?: { message?: string } }).error?.message ?? message;
    } catch {}
    item.reject(
      failure === "upstream_unavailable" ? new AppError(502, "upstream_unavailable", message) : new WorkerLost(message),
    );
    return 200;
  }

  /**
   * A worker is gone (offline, deleted): requests it had not begun answering fail with WorkerLost
   * (the caller runs them elsewhere); answers it was streaming are cut with a clear error.
   */
  failWorker(workerId: string, why: string): void {
    for (const item of [...this.items.values()]) {
      if (item.workerId !== workerId) continue;
      if (item.started) item.pump?.abort();
      else {
        this.drop(item);
        item.reject(new WorkerLost(why));
      }
    }
    this.queues.delete(workerId);
    this.sessions.delete(workerId);
    this.wake(workerId);
  }
}
