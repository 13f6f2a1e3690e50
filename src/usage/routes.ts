import { Elysia } from "elysia";
import { inArray, sql } from "drizzle-orm";
import type { Db } from "../db";
import type { UsageRecorder } from "./recorder";
import { rows } from "../db/raw";
import { notFound, validation } from "../errors";
import { apiKeys, workloads } from "../db/schema";
import { BUCKET_MS, splitParts, splitSeries, windowOf, type MetricsStore } from "./series";
import type { SeriesKeeper } from "./series-store";
import { principalOf } from "../auth/service";
import { isMachineOperator, projectScope } from "../users/access";

/** What this module uses of the app's dependencies. */
interface Deps {
  db: Db;
  usage: UsageRecorder;
  /** Cloud GPU workers' billed time per pod and UTC day (src/cloud), shown to the machine's operator. */
  cloud: { billedByDay(from: string, to: string): Promise<object[]> };
  /** The charts' series: this process's buckets, and the store's (earlier runs, other hosts). */
  metrics: MetricsStore;
  series: SeriesKeeper;
}

/** The priority classes a chart splits by, as the queue names them (src/dispatch/queue.ts `classOf`), in words. */
const CLASSES: Record<string, string> = {
  interactive: "Interactive",
  batch: "Batch (jobs and batch-priority keys)",
};

/** A key's name as the charts' legend reads it. */
function keyLabel(keyId: string, k: { name: string; prefix: string } | undefined): string {
  if (keyId === "") return "Dashboard playground (no key)";
  return k ? `${k.name} (${k.prefix}…)` : `A deleted key (${keyId})`;
}

/**
 * The lines of the charts split by key or by priority class: requests/s, errors/s, tokens/s and
 * mean latency per key, or per class (a job, or a key of batch priority, is batch; a key's class is
 * the one it has now), over the workloads a principal sees (or one of them).
 */
async function splitAnswer(
  deps: Deps,
  by: string,
  minutes: number,
  workloadId: string | undefined,
  scope: string[] | "all",
) {
  if (by !== "key" && by !== "priority") throw validation("by", "must be key or priority");
  const now = Date.now();
  const { from, until } = windowOf(minutes, now);
  const all = await deps.db.select({ id: workloads.id, projectId: workloads.projectId }).from(workloads);
  const seen = all.filter((w) => scope === "all" || scope.includes(w.projectId));
  const ids =
    workloadId === undefined ? seen.map((w) => w.id) : seen.filter((w) => w.id === workloadId).map((w) => w.id);
  if (workloadId !== undefined && ids.length === 0) throw notFound(`workload "${workloadId}"`);
  const stored = await deps.series.workloads(from, until, workloadId);
  const buckets = deps.metrics.splitBuckets(ids, minutes, now, stored);
  const keyIds = [...new Set(buckets.flatMap((b) => Object.keys(b.splits).map((k) => splitParts(k).keyId)))];
  const keys = new Map(
    (keyIds.length
      ? await deps.db
          .select({ id: apiKeys.id, name: apiKeys.name, prefix: apiKeys.prefix, priority: apiKeys.priority })
          .from(apiKeys)
          .where(inArray(apiKeys.id, keyIds))
      : []
    ).map((k) => [k.id, k]),
  );
  const group = (k: string) => {
    const { kind, keyId } = splitParts(k);
    if (by === "key") return keyId;
    return kind === "job" || keys.get(keyId)?.priority === "batch" ? "batch" : "interactive";
  };
  const lines = [...splitSeries(buckets, group)].sort(([a], [b]) => (by === "priority" ? (a < b ? 1 : -1) : 0));
  return {
    interval_s: BUCKET_MS / 1000,
    from: new Date(from).toISOString(),
    complete_until: new Date(until).toISOString(),
    by,
    splits: lines.map(([id, points]) => ({
      id,
      label: by === "key" ? keyLabel(id, keys.get(id)) : CLASSES[id],
      points,
    })),
  };
}

const DAY = /^\d{4}-\d{2}-\d{2}$/;

/** One row of the usage export: a key, project or workload on a day. */
export interface UsageRow {
  day: string;
  id: string;
  label: string;
  requests: number;
  errors: number;
  input_tokens: number;
  output_tokens: number;
}

/**
 * SQL for each grouping: the id column and how a person reads it. A Map, so a name such as
 * `__proto__` or `toString` from the query string is no grouping (an object would find its prototype's).
 */
const GROUPS = new Map([
  [
    "key",
    {
      id: "u.key_id",
      label:
        "coalesce(k.name || ' (' || k.prefix || '…)', CASE u.key_id WHEN '' THEN 'dashboard playground' ELSE u.key_id END)",
    },
  ],
  ["project", { id: "u.project_id", label: "coalesce(p.slug, u.project_id)" }],
  ["workload", { id: "u.workload_id", label: "coalesce(p.slug || '/' || w.slug, u.workload_id)" }],
]);

/** The grouping a `group_by` value names, or 400 `validation_error` naming `group_by`. */
function groupOf(name: string) {
  const g = GROUPS.get(name);
  if (!g) throw validation("group_by", "must be key, project or workload");
  return g;
}

/** Usage per day grouped by key, project or workload between two UTC days (inclusive); of the `projectIds` only, when given. */
export async function usageExport(
  deps: Deps,
  groupBy: string,
  from: string,
  to: string,
  projectIds: string[] | "all" = "all",
): Promise<UsageRow[]> {
  const g = groupOf(groupBy);
  if (projectIds !== "all" && projectIds.length === 0) return [];
  const only =
    projectIds === "all"
      ? sql``
      : sql` AND u.project_id IN (${sql.join(
          projectIds.map((id) => sql`${id}`),
          sql`, `,
        )})`;
  await deps.usage.flush();
  const found = await rows<UsageRow>(
    deps.db,
    sql`SELECT u.day AS day, ${sql.raw(g.id)} AS id, ${sql.raw(g.label)} AS label, SUM(u.requests) AS requests, SUM(u.errors) AS errors,
         SUM(u.input_tokens) AS input_tokens, SUM(u.output_tokens) AS output_tokens
       FROM usage_daily u LEFT JOIN api_keys k ON k.id = u.key_id LEFT JOIN projects p ON p.id = u.project_id LEFT JOIN workloads w ON w.id = u.workload_id
       WHERE u.day >= ${from} AND u.day <= ${to}${only} GROUP BY u.day, ${sql.raw(g.id)}, ${sql.raw(g.label)} ORDER BY u.day, label`,
  );
  // PostgreSQL sums 64-bit numbers as exact decimal text.
  return found.map((r) => ({
    ...r,
    requests: Number(r.requests),
    errors: Number(r.errors),
    input_tokens: Number(r.input_tokens),
    output_tokens: Number(r.output_tokens),
  }));
}

/** CSV with a header line; fields quoted when they need it. */
export function toCsv(rows: UsageRow[], groupBy: string): string {
  const q = (v: string | number) =>
    typeof v === "number" || !/[",\n]/.test(v) ? String(v) : `"${v.replace(/"/g, '""')}"`;
  const head = ["day", `${groupBy}_id`, groupBy, "requests", "errors", "input_tokens", "output_tokens"];
  return (
    [
      head.join(","),
      ...rows.map((r) =>
        [r.day, r.id, r.label, r.requests, r.errors, r.input_tokens, r.output_tokens].map(q).join(","),
      ),
    ].join("\n") + "\n"
  );
}

/**
 * `GET /admin/usage`: requests, errors and tokens per key, project or workload and day, as JSON or
 * CSV; `GET /admin/metrics/split`: the charts' figures per key or priority class.
 */
export const usageRoutes = (deps: Deps) =>
  new Elysia({ prefix: "/admin", detail: { tags: ["admin"] } })
    .get(
      "/metrics/split",
      ({ query, request }) => {
        const q = query as Record<string, string | undefined>;
        const minutes = Math.min(Math.max(Number(q.minutes ?? 15) || 15, 1), 60);
        return splitAnswer(deps, q.by ?? "key", minutes, q.workload || undefined, projectScope(principalOf(request)));
      },
      {
        detail: {
          summary:
            "The charts split by key or by priority class (?by=key|priority, ?minutes 1–60, ?workload an id): per line, one point per complete 10 s bucket with requests/s, errors/s, tokens/s and the mean latency; nulls in a bucket no host was up in",
        },
      },
    )
    .get(
      "/usage",
      async ({ query, request, set }) => {
        const q = query as Record<string, string | undefined>;
        const groupBy = q.group_by ?? "workload";
        const today = new Date().toISOString().slice(0, 10);
        const from = q.from ?? new Date(Date.now() - 29 * 86_400_000).toISOString().slice(0, 10);
        const to = q.to ?? today;
        for (const [f, v] of [
          ["from", from],
          ["to", to],
        ] as const)
          if (!DAY.test(v)) throw validation(f, "must be a UTC day as YYYY-MM-DD");
        const found = await usageExport(deps, groupBy, from, to, projectScope(principalOf(request)));
        if (q.format === "csv" || (!q.format && (request.headers.get("accept") ?? "").includes("text/csv"))) {
          set.headers["content-type"] = "text/csv; charset=utf-8";
          set.headers["content-disposition"] = `attachment; filename="inferd-usage-${groupBy}-${from}-${to}.csv"`;
          return toCsv(found, groupBy);
        }
        // The cloud pods' billed time is the operator's account: theirs to see.
        const who = principalOf(request);
        const cloud = isMachineOperator(who) ? await deps.cloud.billedByDay(from, to) : undefined;
        return { group_by: groupBy, from, to, rows: found, ...(cloud ? { cloud } : {}) };
      },
      {
        detail: {
          summary:
            "Usage per key, project or workload and day (?group_by, ?from, ?to as YYYY-MM-DD, ?format=csv or Accept: text/csv); a project member sees their projects' only",
        },
      },
    );
