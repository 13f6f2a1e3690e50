/**
 * Who sees which batch and file. Files and batches belong to a project. On a workload's base
 * (`/endpoint/<p>/<w>/v1`) a key sees the batches made on that base; on the project's base
 * (`/endpoint/<p>/v1`) it sees those whose workloads all fall in its scope (every batch, for a
 * project-wide key). An uploaded file is seen by the key that uploaded it and by project-wide keys
 * (an endpoint-scoped key sees only its own uploads); a batch's output and error files are seen by
 * whoever sees the batch. What a key may not see answers 404, as if it did not exist.
 */
import { canTouchWorkload } from "../auth/service";
import type { KeyRecord } from "../keys/service";
import type { BatchRow, FileRow } from "./schema";

/** The key of a request and the base it came in on. */
export interface Viewer {
  key: KeyRecord;
  project: string;
  /** The workload of a per-workload base; undefined on the project's base. */
  workloadId?: string;
}

/** Whether `v` may see (and cancel) the batch. */
export function canSeeBatch(v: Viewer, b: Pick<BatchRow, "projectId" | "workloadId" | "workloads">): boolean {
  if (b.projectId !== v.key.projectId) return false;
  if (v.workloadId !== undefined) return b.workloadId === v.workloadId;
  return (JSON.parse(b.workloads) as string[]).every((slug) => canTouchWorkload(v.key, v.project, slug));
}

/** Whether `v` may see (use, download, delete) an uploaded file: its own upload, or any with a project-wide key. */
export function canSeeUpload(v: Viewer, f: Pick<FileRow, "projectId" | "keyId">): boolean {
  return f.projectId === v.key.projectId && (v.key.scope === "project" || f.keyId === v.key.id);
}
