/**
 * A workload's capture setting for the request inspector: while its `capture_until` is in the
 * future, the data plane keeps its requests' bodies (request and answer) with their records. Only
 * the operator turns it on (the admin API's workload PATCH), for at most a week at a time; every
 * change is audited as `workload.capture` (`setCapture` in ./service.ts). Tenants' control-plane
 * keys cannot set or see it.
 */
import { z } from "zod";
import { validation } from "../errors";

/** The longest a capture may be set ahead: a week. */
export const MAX_CAPTURE_MS = 7 * 24 * 3_600_000;

/** `capture_until` in an admin workload PATCH: an ISO 8601 time (with its offset), or null to stop. */
export const CaptureUntil = z.iso
  .datetime({ offset: true, message: "must be an ISO 8601 time such as 2030-01-01T12:00:00Z, or null" })
  .nullable();

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
  if (t <= now)
    throw validation("capture_until", "is in the past; send a time ahead of now, or null to stop capturing");
  if (t > now + MAX_CAPTURE_MS + 60_000)
    throw validation("capture_until", "is more than 7 days ahead; bodies may be captured for a week at most");
  return new Date(t).toISOString();
}
