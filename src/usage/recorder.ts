import { eq, sql } from "drizzle-orm";
import type { Db } from "../db";
import { utcDay } from "../ids";
import { batch, type Statement } from "../db/raw";
import type { Finished } from "./meter";

/** Usage to add to one key or workload. */
export interface UsageDelta {
  requests?: number;
  errors?: number;
  inputTokens?: number;
  outputTokens?: number;
}

type Counter = { requests: number; errors: number; inputTokens: number; outputTokens: number; lastUsedAt: number };

/** Usage counted for one key since the last flush (`lastUsedAt`: ms). */
export type KeyUsage = Pick<Counter, "requests" | "inputTokens" | "outputTokens" | "lastUsedAt">;

function add(map: Map<string, Counter>, id: string, delta: UsageDelta): void {
  const cur = map.get(id) ?? { requests: 0, errors: 0, inputTokens: 0, outputTokens: 0, lastUsedAt: 0 };
  cur.requests += delta.requests ?? 0;
  cur.errors += delta.errors ?? 0;
  cur.inputTokens += delta.inputTokens ?? 0;
  cur.outputTokens += delta.outputTokens ?? 0;
  cur.lastUsedAt = Date.now();
  map.set(id, cur);
}

/**
 * Usage per key and per workload, counted in memory and written in one transaction per flush, so
 * the request path never waits for a disk write. `flush()` runs on a timer, before usage is read,
 * and at shutdown.
 */
export class UsageRecorder {
  private keys = new Map<string, Counter>();
  private workloads = new Map<string, Counter>();
  private daily = new Map<string, { day: string; keyId: string; workloadId: string; projectId: string; c: Counter }>();

  constructor(
    private readonly db: Db,
    /** The write adding a key's usage to its counters (the keys feature's own: ../keys/service.ts `keyUsageWrite`). */
    private readonly keyUsage: (keyId: string, used: KeyUsage) => Statement,
  ) {}

  /** Adds usage to a key; cheap, no I/O. */
  record(keyId: string, delta: UsageDelta): void {
    add(this.keys, keyId, delta);
  }

  /** Adds usage to a workload; cheap, no I/O. */
  recordWorkload(workloadId: string, delta: UsageDelta): void {
    add(this.workloads, workloadId, delta);
  }

  /** Adds a finished request to its day's row of (key, workload); cheap, no I/O. */
  recordDaily(f: Finished): void {
    const day = utcDay();
    const id = `${day}|${f.keyId ?? ""}|${f.workloadId}`;
    let d = this.daily.get(id);
    if (!d)
      this.daily.set(
        id,
        (d = {
          day,
          keyId: f.keyId ?? "",
          workloadId: f.workloadId,
          projectId: f.projectId,
          c: { requests: 0, errors: 0, inputTokens: 0, outputTokens: 0, lastUsedAt: 0 },
        }),
      );
    d.c.requests++;
    if (!f.ok) d.c.errors++;
    d.c.inputTokens += f.usage.inputTokens;
    d.c.outputTokens += f.usage.outputTokens;
  }

  private flushing: Promise<void> = Promise.resolve();

  /**
   * Writes what was counted since the last flush, in one transaction; flushes run one after
   * another, and the promise settles once everything counted before the call is written.
   */
  flush(): Promise<void> {
    this.flushing = this.flushing.then(
      () => this.write(),
      () => this.write(),
    );
    return this.flushing;
  }

  private async write(): Promise<void> {
    if (this.keys.size === 0 && this.workloads.size === 0 && this.daily.size === 0) return;
    const [keys, wls, daily] = [this.keys, this.workloads, this.daily];
    this.keys = new Map();
    this.workloads = new Map();
    this.daily = new Map();
    const db = this.db;
    await batch(db, [
      ...[...daily.values()].map(
        (
          d,
        ) => sql`INSERT INTO usage_daily (day, key_id, workload_id, project_id, requests, errors, input_tokens, output_tokens)
          VALUES (${d.day}, ${d.keyId}, ${d.workloadId}, ${d.projectId}, ${d.c.requests}, ${d.c.errors}, ${d.c.inputTokens}, ${d.c.outputTokens})
          ON CONFLICT (day, key_id, workload_id) DO UPDATE SET requests = usage_daily.requests + excluded.requests, errors = usage_daily.errors + excluded.errors,
            input_tokens = usage_daily.input_tokens + excluded.input_tokens, output_tokens = usage_daily.output_tokens + excluded.output_tokens`,
      ),
      ...[...keys].map(([id, d]) => this.keyUsage(id, d)),
      // The workload may have been deleted since: insert only while it exists.
      ...[...wls].map(
        ([
          id,
          d,
        ]) => sql`INSERT INTO workload_usage (workload_id, requests, errors, input_tokens, output_tokens, last_used_at)
          SELECT ${id}, ${d.requests}, ${d.errors}, ${d.inputTokens}, ${d.outputTokens}, ${new Date(d.lastUsedAt).toISOString()} WHERE EXISTS (SELECT 1 FROM workloads WHERE id = ${id})
          ON CONFLICT (workload_id) DO UPDATE SET requests = workload_usage.requests + excluded.requests, errors = workload_usage.errors + excluded.errors,
            input_tokens = workload_usage.input_tokens + excluded.input_tokens, output_tokens = workload_usage.output_tokens + excluded.output_tokens, last_used_at = excluded.last_used_at`,
      ),
    ]);
  }
}
