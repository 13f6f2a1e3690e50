/**
 * The capture setting of the request inspector: while a workload's `capture_until` is in the
 * future, the data plane keeps its requests' bodies (request and answer) with their records. Only
 * the operator turns it on (the admin API's workload PATCH), for at most a week at a time; every
 * change is audited as `workload.capture`. Tenants' control-plane keys cannot set or see it.
 */
import { eq } from "drizzle-orm";
import { z } from "zod";
import type { Db } from "../db";
import { workloads } from "../db/schema";
import { validation } from "../errors";
import { audit } from "../audit/service";

/** The longest a capture may be set ahead: a week. */
export const MAX_CAPTURE_MS = 7 * 24 * 3_600_000;

/** `capture_until` in an admin workload PATCH: an ISO 8601 time (with its offset), or null to stop. */
export const CaptureUntil = z.iso.datetime({ offset: true, message: "must be an ISO 8601 time such as 2030-01-01T12:00:00Z, or null" }).nullable();

/**
 * Whether the workload's bodies are kept now (the data plane's check, per request).
 * @example if (capturing(w)) record.bodies = …;
 */
export function capturing(w: { capture_until: string | null }, now = Date.now()): boolean {
  return w.capture_until !== null && Date.parse(w.capture_until) > now;
}

/**
 * The capture end to store for a sent value: null, or a time ahead of now by at most a week
 * (400 at `capture_until` otherwise), normalised to UTC.
 */
export function checkCaptureUntil(value: string | null, now = Date.now()): string | null {
  if (value === null) return null;
  const t = Date.parse(value);
  if (!Number.isFinite(t)) throw validation("capture_until", "must be an ISO 8601 time, or null");
  if (t <= now) throw validation("capture_until", "is in the past; send a time ahead of now, or null to stop capturing");
  if (t > now + MAX_CAPTURE_MS + 60_000) throw validation("capture_until", "is more than 7 days ahead; bodies may be captured for a week at most");
  return new Date(t).toISOString();
}

/** What a capture change reads of the workload. */
export interface CaptureOf {
  id: string;
  slug: string;
  project_slug: string;
  capture_until: string | null;
}

/** Sets (or clears, with null) the workload's capture end, already checked; audited as `workload.capture`. */
export async function setCapture(db: Db, current: CaptureOf, until: string | null): Promise<void> {
  if (until === current.capture_until) return;
  await db.update(workloads).set({ captureUntil: until }).where(eq(workloads.id, current.id));
  await audit(db, "workload.capture", { type: "workload", id: current.id, label: `${current.project_slug}/${current.slug}` }, { capture_until: { from: current.capture_until, to: until } });
}
