/** The request inspector's query schema: the filter and paging of a workload's request list. */
import { z } from "zod";
import { fromSchemaIssue } from "../errors";

/** Most rows a page may ask for. */
export const MAX_REQUESTS_PAGE = 200;

const text = (max: number) =>
  z
    .string()
    .trim()
    .max(max)
    .optional()
    .transform((s) => s || undefined);

/**
 * `GET /admin/workloads/:id/requests` (and a project's) query: `status` (`ok`, `error`, a status such as
 * `429`, or an error code), `key` (a key id), `workload` (a workload id), `source` (`api`, `playground`), `q` (a request or trace id prefix, or part of the model), `since`
 * (an ISO time), `before` (an ISO time or the `next_before` of the previous page), `limit` (1–200).
 */
export const RequestQuery = z.object({
  status: text(64).refine(
    (s) => s === undefined || /^[A-Za-z0-9_.-]+$/.test(s),
    "must be ok, error, refused, a status such as 429, or an error code",
  ),
  key: text(128),
  /** A workload id (the project's list). */
  workload: text(128),
  /** `api` (clients of the API) or `playground` (the dashboard's playground). */
  source: z.enum(["api", "playground"], { message: "must be api or playground" }).optional(),
  q: text(256),
  since: text(64),
  before: text(400),
  limit: z
    .string()
    .regex(/^\d{1,4}$/, "must be a whole number")
    .optional()
    .transform((s) => (s === undefined ? undefined : Number(s)))
    .refine((n) => n === undefined || (n >= 1 && n <= MAX_REQUESTS_PAGE), `must be between 1 and ${MAX_REQUESTS_PAGE}`),
});
export type RequestQuery = z.infer<typeof RequestQuery>;

/** The query checked, or 400 naming the field. */
export function requestQuery(query: Record<string, unknown>): RequestQuery {
  const r = RequestQuery.safeParse(query);
  if (!r.success) throw fromSchemaIssue("query", r.error.issues[0]);
  return r.data;
}
