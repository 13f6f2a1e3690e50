import { sql } from "drizzle-orm";
import type { Db } from "../db";
import { rows } from "../db/raw";
import { AppError } from "../errors";
import { andThen, type Maybe } from "../db/memo";

/** How long a project's measured job bytes are trusted before they are summed again. */
const FRESH_MS = 10_000;

/**
 * Stored async-job bytes per project (bodies and results, and the Files API's files), against
 * `--max-job-bytes-per-project`.
 * Sums come from the store (SQLite's length() reads no blob pages) and are kept for a few seconds,
 * plus what this process stored since, so submission does not scan the table each time.
 */
export class JobQuota {
  private sums = new Map<string, { bytes: number; at: number }>();
  constructor(
    private db: Db,
    readonly limit: number,
    private now: () => number = Date.now,
  ) {}

  /** Bytes a project's jobs hold now (recounted when the last count is older than FRESH_MS): at once when known. */
  used(projectId: string): Maybe<number> {
    const cached = this.sums.get(projectId);
    if (cached && this.now() - cached.at < FRESH_MS) return cached.bytes;
    return rows<{ bytes: number | string | null }>(
      this.db,
      sql`SELECT coalesce((SELECT SUM(length(j.body) + coalesce(length(j.data), 0)) FROM jobs j JOIN workloads w ON w.id = j.workload_id WHERE w.project_id = ${projectId}), 0) + coalesce((SELECT SUM(f.bytes) FROM files f WHERE f.project_id = ${projectId}), 0) AS bytes`,
    ).then((r) => {
      const bytes = Number(r[0]?.bytes ?? 0);
      this.sums.set(projectId, { bytes, at: this.now() });
      return bytes;
    });
  }

  /**
   * Admits a job (or a whole batch: `what`) of `size` bytes for a project and counts it: 413 when it
   * is larger than the whole quota, 429 (with Retry-After) when the project's stored jobs would pass it.
   */
  admit(projectId: string, size: number, what = "the job"): Maybe<void> {
    if (size > this.limit)
      throw new AppError(
        413,
        "payload_too_large",
        `${what} is larger than a project's job storage (${this.limit} bytes, --max-job-bytes-per-project)`,
      );
    return andThen(this.used(projectId), (used) => {
      if (used + size > this.limit) {
        throw new AppError(
          429,
          "job_storage_full",
          `this project's stored jobs hold ${used} of ${this.limit} bytes (--max-job-bytes-per-project); finished jobs are removed after the retention period, so retry later`,
          { "retry-after": "60" },
        );
      }
      this.sums.get(projectId)!.bytes += size;
    });
  }
}
