/**
 * After the run: waits (bounded) until every job answered 202 is completed or failed and each of its
 * deliveries is delivered or terminal, reading `GET /endpoint/<p>/<w>/jobs/<id>` (in a cluster, from
 * a host other than the one that accepted it); then matches what inferd says against what each
 * receiver got, by job id.
 */
import { arrivalsByJob, contextsByJob, RECEIVERS, type ReceiverName, type SoakReceiver } from "./receivers";
import type { Outcome } from "./traffic";

/** A delivery as `GET …/jobs/:id` shows it. */
interface DeliveryView {
  url: string;
  state: "pending" | "delivered" | "terminal";
  attempts: number;
  last_error: string | null;
}

/** A job as `GET …/jobs/:id` shows it (null: 404). */
export interface JobView {
  status: "queued" | "running" | "completed" | "failed";
  runs: number;
  data?: { status?: string; error?: { code?: string; http_status?: number } };
  deliveries: DeliveryView[];
}

/** A job answered 202. */
interface Accepted {
  jobId: string;
  workload: string;
  ctx: string;
  /** The host that answered 202 (index into the hosts' URLs). */
  host: number;
}

const settled = (j: JobView | null) =>
  j === null ||
  ((j.status === "completed" || j.status === "failed") && j.deliveries.every((d) => d.state !== "pending"));

/** Runs `fn` over `items`, `n` at a time. */
async function eachLimited<T>(items: T[], n: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(n, items.length) }, async () => {
      while (next < items.length) await fn(items[next++]);
    }),
  );
}

/**
 * Polls every accepted job until all are settled or `boundMs` pass, each through the next host after
 * the one that accepted it (the same one when there is one host); returns each one's last view
 * (null for a 404: the job is gone) and how long the drain took.
 */
export async function drainJobs(
  bases: string[],
  liveKey: string,
  accepted: Accepted[],
  boundMs: number,
): Promise<{ views: Map<string, JobView | null>; drainMs: number; drained: boolean }> {
  const views = new Map<string, JobView | null>();
  const t0 = Date.now();
  let open = accepted;
  while (open.length > 0 && Date.now() - t0 < boundMs) {
    await eachLimited(open, 8, async (a) => {
      const base = bases[(a.host + 1) % bases.length];
      const r = await fetch(`${base}/endpoint/soak/${a.workload}/jobs/${a.jobId}`, {
        headers: { authorization: `Bearer ${liveKey}` },
      }).catch(() => undefined);
      if (!r) return;
      if (r.status === 404) views.set(a.jobId, null);
      else if (r.ok) views.set(a.jobId, (await r.json()) as JobView);
      else await r.body?.cancel();
    });
    open = open.filter((a) => !views.has(a.jobId) || !settled(views.get(a.jobId)!));
    if (open.length > 0) await Bun.sleep(500);
  }
  return { views, drainMs: Date.now() - t0, drained: open.length === 0 };
}

/** What one receiver was owed and got. */
export interface DeliveryTally {
  /** Finished accepted jobs: each owes one delivery here. */
  owed: number;
  /** inferd's view of those deliveries. */
  delivered: number;
  terminal: number;
  pending: number;
  /** Owed jobs with no delivery to this receiver at all in inferd. */
  noRecord: string[];
  /** The receiver's view: owed jobs it got at least once, requests beyond the first per job, all requests. */
  received: number;
  duplicates: number;
  requests: number;
  /** Owed jobs never received (for the 200 receivers: lost unless still pending). */
  lost: string[];
}

/** The jobs verdict: how many were accepted and how they ended. */
export interface JobTally {
  accepted: number;
  completed: number;
  failed: number;
  failedByCode: Record<string, number>;
  /** Accepted but 404 afterwards. */
  missing: string[];
  /** Still queued/running (or a delivery pending) at the end of the drain. */
  unfinished: string[];
  maxRuns: number;
  /** Job posts whose answer never came (inferd killed under them) but which reached a receiver: accepted without a 202. */
  acceptedWithoutAck: number;
  /** Job ids receivers heard of that no client posted (should be 0). */
  unknownAtReceivers: number;
}

/** Tallies jobs and deliveries from the clients' outcomes, inferd's views and the receivers' logs. */
export function tallyJobs(
  outcomes: Outcome[],
  views: Map<string, JobView | null>,
  receivers: Record<ReceiverName, SoakReceiver>,
  receiverOfUrl: Map<string, ReceiverName>,
): { jobs: JobTally; deliveries: Record<ReceiverName, DeliveryTally> } {
  const accepted = outcomes.filter((o) => o.kind === "job" && o.status === 202 && o.jobId);
  const ids = new Set(accepted.map((o) => o.jobId!));
  const unacked = new Set(
    outcomes.filter((o) => o.kind === "job" && o.status === undefined && o.ctx).map((o) => o.ctx!),
  );
  const jobs: JobTally = {
    accepted: accepted.length,
    completed: 0,
    failed: 0,
    failedByCode: {},
    missing: [],
    unfinished: [],
    maxRuns: 0,
    acceptedWithoutAck: 0,
    unknownAtReceivers: 0,
  };
  const finished: [string, JobView][] = [];
  for (const o of accepted) {
    const v = views.get(o.jobId!);
    if (v === null) jobs.missing.push(o.jobId!);
    else if (!v || !settled(v)) jobs.unfinished.push(o.jobId!);
    if (!v) continue;
    jobs.maxRuns = Math.max(jobs.maxRuns, v.runs);
    if (v.status === "completed") jobs.completed++;
    if (v.status === "failed") {
      jobs.failed++;
      const code = v.data?.error?.code ?? "unknown";
      jobs.failedByCode[code] = (jobs.failedByCode[code] ?? 0) + 1;
    }
    if (v.status === "completed" || v.status === "failed") finished.push([o.jobId!, v]);
  }
  const deliveries = {} as Record<ReceiverName, DeliveryTally>;
  const strangers = new Map<string, string>();
  for (const name of RECEIVERS) {
    const got = arrivalsByJob(receivers[name]);
    const t: DeliveryTally = {
      owed: finished.length,
      delivered: 0,
      terminal: 0,
      pending: 0,
      noRecord: [],
      received: 0,
      duplicates: 0,
      requests: 0,
      lost: [],
    };
    for (const [id, v] of finished) {
      const d = v.deliveries.find((x) => receiverOfUrl.get(x.url) === name);
      if (!d) t.noRecord.push(id);
      else t[d.state]++;
      const n = got.get(id) ?? 0;
      if (n > 0) t.received++;
      else if (receivers[name].status === 200 && d?.state !== "pending") t.lost.push(id);
      if (n > 1) t.duplicates += n - 1;
    }
    for (const n of got.values()) t.requests += n;
    for (const [id, ctx] of contextsByJob(receivers[name])) if (!ids.has(id)) strangers.set(id, ctx);
    deliveries[name] = t;
  }
  for (const ctx of strangers.values()) {
    if (unacked.has(ctx)) jobs.acceptedWithoutAck++;
    else jobs.unknownAtReceivers++;
  }
  return { jobs, deliveries };
}
