/**
 * The dashboard's read of a project's batches and files (the Batch API itself answers keys only):
 * the batches newest first with their counts, workloads and files; one batch with each of its
 * requests' job (its `custom_id`, workload, state and error); a file's bytes. The dashboard sees
 * what a project-wide key of the project sees.
 */
import { Elysia } from "elysia";
import { and, asc, desc, eq, inArray } from "drizzle-orm";
import type { Db } from "../db";
import { first } from "../db/raw";
import { batches, files, jobs, workloads } from "../db/schema";
import { notFound } from "../errors";
import type { KeyRecord } from "../keys/service";
import { getProject, type ProjectView } from "../projects/service";
import type { Viewer } from "./access";
import { fileContent, type FilesDeps } from "./files";
import { liveCounts, requestsOf } from "./progress";
import { batchView, type BatchRow } from "./schema";

/** Requests of one batch the dashboard lists at most (the rest is in its output file). */
const MAX_JOBS = 1000;

/** What a project-wide key of the project sees: the dashboard's view of its batches and files. */
function projectViewer(p: ProjectView): Viewer {
  const key = { id: "", projectId: p.id, projectSlug: p.slug, scope: "project", endpoints: "[]" } as KeyRecord;
  return { key, project: p.slug };
}

/** The names and sizes of files by id (the ones that still exist). */
async function filesById(db: Db, ids: (string | null)[]): Promise<Map<string, { filename: string; bytes: number }>> {
  const wanted = ids.filter((id): id is string => !!id);
  if (!wanted.length) return new Map();
  const rows = await db
    .select({ id: files.id, filename: files.filename, bytes: files.bytes })
    .from(files)
    .where(inArray(files.id, wanted));
  return new Map(rows.map((r) => [r.id, { filename: r.filename, bytes: r.bytes }]));
}

/** A batch as the dashboard shows it: OpenAI's object plus its workloads' slugs and its files' names. */
function dashboardBatch(
  b: BatchRow,
  counts: Map<string, unknown>,
  named: Map<string, { filename: string; bytes: number }>,
) {
  const file = (id: string | null) => (id ? { id, ...(named.get(id) ?? { filename: null, bytes: null }) } : null);
  return {
    ...batchView(b, counts.get(b.id) as Parameters<typeof batchView>[1]),
    workloads: JSON.parse(b.workloads) as string[],
    files: { input: file(b.inputFileId), output: file(b.outputFileId), error: file(b.errorFileId) },
  };
}

/** A project's batches, newest first (at most `limit`). */
export async function projectBatches(db: Db, p: ProjectView, limit: number) {
  const rows = await db
    .select()
    .from(batches)
    .where(eq(batches.projectId, p.id))
    .orderBy(desc(batches.createdAt), desc(batches.id))
    .limit(limit);
  const [counts, named] = await Promise.all([
    liveCounts(db, rows),
    filesById(
      db,
      rows.flatMap((b) => [b.inputFileId, b.outputFileId, b.errorFileId]),
    ),
  ]);
  return rows.map((b) => dashboardBatch(b, counts, named));
}

/** The error message a finished job's data holds, or null. */
function errorOf(data: string | null): string | null {
  if (!data) return null;
  const e = (JSON.parse(data) as { error?: { message?: string } | string }).error;
  return typeof e === "string" ? e : (e?.message ?? null);
}

/** One batch of the project with its requests' jobs (in the input file's order), or 404. */
export async function projectBatch(db: Db, p: ProjectView, id: string) {
  const b = await first(
    db
      .select()
      .from(batches)
      .where(and(eq(batches.id, id), eq(batches.projectId, p.id))),
  );
  if (!b) throw notFound(`batch "${id}"`);
  const [counts, named, rows] = await Promise.all([
    liveCounts(db, [b]),
    filesById(db, [b.inputFileId, b.outputFileId, b.errorFileId]),
    db
      .select({
        id: jobs.id,
        customId: jobs.customId,
        status: jobs.status,
        requestId: jobs.requestId,
        createdAt: jobs.createdAt,
        finishedAt: jobs.finishedAt,
        data: jobs.data,
        workloadId: jobs.workloadId,
        workloadSlug: workloads.slug,
      })
      .from(jobs)
      .leftJoin(workloads, eq(workloads.id, jobs.workloadId))
      .where(requestsOf(b.id))
      .orderBy(asc(jobs.id))
      .limit(MAX_JOBS),
  ]);
  return {
    ...dashboardBatch(b, counts, named),
    jobs: rows.map((j) => ({
      job_id: j.id,
      batch_id: b.id,
      custom_id: j.customId,
      status: j.status,
      workload_id: j.workloadId,
      workload_slug: j.workloadSlug,
      request_id: j.requestId,
      created_at: j.createdAt,
      finished_at: j.finishedAt,
      error: errorOf(j.data),
    })),
    jobs_shown: rows.length,
  };
}

/** Admin routes: `GET /admin/projects/:project/batches`, `…/batches/:batch_id`, `…/files/:file_id/content`. */
export const adminBatchRoutes = (deps: FilesDeps) =>
  new Elysia({ prefix: "/admin/projects/:project", detail: { tags: ["batch"] } })
    .get(
      "/batches",
      async ({ params, query }) => {
        const n = Math.trunc(Number(query.limit ?? 50));
        const limit = Math.min(Math.max(Number.isFinite(n) ? n : 50, 1), 500);
        return projectBatches(deps.db, await getProject(deps.db, params.project), limit);
      },
      { detail: { summary: "A project's batches, newest first, with counts, workloads and files (`?limit=`, ≤ 500)" } },
    )
    .get(
      "/batches/:batch_id",
      async ({ params }) => projectBatch(deps.db, await getProject(deps.db, params.project), params.batch_id),
      {
        detail: {
          summary: `A batch of the project with its requests' jobs: custom_id, workload, state, error (the first ${MAX_JOBS})`,
        },
      },
    )
    .get(
      "/files/:file_id/content",
      async ({ params, request }) =>
        fileContent(deps, request, projectViewer(await getProject(deps.db, params.project)), params.file_id),
      { detail: { summary: "A file of the project's batches: an input, output or error file's bytes (JSONL)" } },
    );
