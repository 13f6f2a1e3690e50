/**
 * The shapes of the OpenAI Files and Batch APIs as inferd serves them: the request bodies and
 * queries (zod, so the schema is the type) and the objects answered, field for field as OpenAI's
 * (`file-…` file objects, `batch_…` batch objects, timestamps in Unix seconds).
 */
import { z } from "zod";
import { DATA_ROUTES } from "../dataplane/table";
import type { batches, files } from "../db/schema";

/** The endpoints a batch may target, and the job kind each line runs as. */
export const BATCH_ENDPOINTS: Record<string, string> = Object.fromEntries(
  DATA_ROUTES.filter((r) => r.batch && r.kind).map((r) => [`/v1/${r.path}`, r.kind!]),
);

/** Requests one batch may hold (OpenAI's limit). */
export const MAX_BATCH_REQUESTS = 50_000;

/** `POST …/v1/batches`. Other fields OpenAI's SDK may send (`output_expires_after`) are accepted and ignored. */
export const BatchCreate = z.object({
  input_file_id: z.string().min(1),
  endpoint: z
    .string()
    .refine((e) => e in BATCH_ENDPOINTS, { message: `must be one of ${Object.keys(BATCH_ENDPOINTS).join(", ")}` }),
  completion_window: z.literal("24h", { message: 'must be "24h"' }),
  metadata: z
    .record(
      z.string().max(64, "keys are at most 64 characters"),
      z.string().max(512, "values are at most 512 characters"),
    )
    .refine((m) => Object.keys(m).length <= 16, { message: "holds at most 16 keys" })
    .nullable()
    .optional(),
});

/** A batch creation request as checked. */
export type BatchCreate = z.infer<typeof BatchCreate>;

/** A cursor page's query: `limit` (clamped to 1…`max`) and `after` (the id the page follows). */
export function pageQuery(
  query: Record<string, string | undefined>,
  byDefault: number,
  max: number,
): { limit: number; after?: string } {
  const n = Math.trunc(Number(query.limit ?? byDefault));
  return { limit: Math.min(Math.max(Number.isFinite(n) ? n : byDefault, 1), max), after: query.after || undefined };
}

/** A cursor page as OpenAI answers lists (the SDK pages on `has_more` and the last id). */
export function page<T extends { id: string }>(all: T[], q: { limit: number; after?: string }) {
  const from = q.after ? all.findIndex((x) => x.id === q.after) + 1 : 0;
  const data = all.slice(from, from + q.limit);
  return {
    object: "list" as const,
    data,
    first_id: data[0]?.id ?? null,
    last_id: data.at(-1)?.id ?? null,
    has_more: from + q.limit < all.length,
  };
}

/** A stored file without its bytes. */
export type FileRow = Omit<typeof files.$inferSelect, "content">;
/** A stored batch. */
export type BatchRow = typeof batches.$inferSelect;

/** Unix seconds of a stored timestamp, or null. */
export const unix = (iso: string | null): number | null => (iso ? Math.floor(Date.parse(iso) / 1000) : null);

/** OpenAI's file object. */
export const fileView = (f: FileRow) => ({
  id: f.id,
  object: "file" as const,
  bytes: f.bytes,
  created_at: unix(f.createdAt)!,
  filename: f.filename,
  purpose: f.purpose,
  status: "processed" as const,
  expires_at: null,
  status_details: null,
});

/** A batch's request counts. */
export interface RequestCounts {
  total: number;
  completed: number;
  failed: number;
}

/** OpenAI's batch object; `counts` are the live ones while it runs (the stored ones once it ended). */
export const batchView = (b: BatchRow, counts?: RequestCounts) => ({
  id: b.id,
  object: "batch" as const,
  endpoint: b.endpoint,
  errors: b.errors ? JSON.parse(b.errors) : null,
  input_file_id: b.inputFileId,
  completion_window: b.completionWindow,
  status: b.status,
  output_file_id: b.outputFileId,
  error_file_id: b.errorFileId,
  created_at: unix(b.createdAt)!,
  in_progress_at: unix(b.inProgressAt),
  expires_at: unix(b.expiresAt),
  finalizing_at: unix(b.finalizingAt),
  completed_at: unix(b.completedAt),
  failed_at: unix(b.failedAt),
  expired_at: unix(b.expiredAt),
  cancelling_at: unix(b.cancellingAt),
  cancelled_at: unix(b.cancelledAt),
  request_counts: counts ?? { total: b.total, completed: b.completed, failed: b.failed },
  metadata: b.metadata ? (JSON.parse(b.metadata) as Record<string, string>) : null,
});

/** OpenAI's batch object, as answered. */
export type BatchObject = ReturnType<typeof batchView>;
