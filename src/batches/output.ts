/**
 * The lines of a batch's output and error files, in OpenAI's format, built from its requests' job
 * results: a request the runtime answered 2xx goes to the output file, every other one to the error
 * file (with the runtime's status and body when it answered, and always an `error` object).
 */
import type { JobData } from "../jobs/result";

/** A request of a batch as its job row holds it. */
export interface LineJob {
  id: string;
  customId: string | null;
  requestId: string | null;
  status: string;
  data: string | null;
}

/** The result line's id: `batch_req_` and the job id's hex digits (the same line always has the same id). */
export const lineId = (jobId: string) => `batch_req_${jobId.replaceAll("-", "")}`;

/** OpenAI's error `type` for a runtime status, as its own error bodies name it. */
const errorType = (status: number) =>
  status >= 500 ? "server_error" : status === 429 ? "rate_limit_error" : "invalid_request_error";

/**
 * One finished request as a line of the output file (`ok`) or of the error file.
 * @example resultLine({ id, customId: "a", requestId: "req_1", status: "completed", data }) // → { ok: true, text: '{"id":"batch_req_…","custom_id":"a","response":{"status_code":200,…},"error":null}' }
 */
export function resultLine(job: LineJob): { ok: boolean; text: string } {
  const data = (job.data ? JSON.parse(job.data) : {}) as Partial<JobData>;
  const head = { id: lineId(job.id), custom_id: job.customId };
  if (job.status === "completed" && data.status === "ok") {
    return {
      ok: true,
      text: JSON.stringify({
        ...head,
        response: { status_code: 200, request_id: job.requestId, body: data.payload ?? null },
        error: null,
      }),
    };
  }
  const e = data.error ?? { code: "request_failed", message: "the request failed" };
  const status = e.http_status;
  const response = status
    ? {
        status_code: status,
        request_id: job.requestId,
        body: { error: { message: e.message, type: errorType(status), param: null, code: e.code } },
      }
    : null;
  return { ok: false, text: JSON.stringify({ ...head, response, error: { code: e.code, message: e.message } }) };
}
