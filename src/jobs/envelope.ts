import { z } from "zod";
import { AppError, badRequest, fromSchemaIssue, validation } from "../errors";
import type { Workload } from "../workloads/service";
import { checkModel } from "../dataplane/target";
import { ACCEPTED_KINDS, canonicalKind, KINDS } from "./kinds";
import { detached, rawFields } from "./raw";
import { parseJsonBytes } from "../http";

/** The chat body a `chat` job must carry (the synchronous route's shape), checked at submission. */
export const ChatBody = z.looseObject({
  model: z.string().optional(),
  messages: z
    .array(z.looseObject({ role: z.string().min(1), content: z.union([z.string(), z.array(z.unknown()), z.null()]) }))
    .min(1, "must hold at least one message"),
  temperature: z.number().optional(),
  max_tokens: z.number().int().positive().optional(),
  stream: z.boolean().optional(),
});

/** A job as accepted: what to store and run. */
export interface AcceptedJob {
  kind: string;
  body: Uint8Array;
  contentType: string;
  /** The caller's `context` exactly as sent, or null when absent. */
  context: string | null;
}

const ENVELOPE_FIELDS = new Set(["kind", "body", "body_b64", "content_type", "context"]);
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;
const RAW_FIELDS = ["body", "context"] as const;
const encoder = new TextEncoder();

/** A parsed job envelope, with its source text (for the raw `context` and `body`). */
type Envelope = { value: Record<string, unknown>; text: string };

/** Parses one envelope's JSON text; 400 unless it is a JSON object (`what` names it in the error). */
export function parseEnvelope(text: string, what = "body"): Envelope {
  const value = parseJsonBytes(text);
  if (!value || typeof value !== "object" || Array.isArray(value))
    throw validation(what, "the job envelope must be a JSON object");
  return { value: value as Record<string, unknown>, text };
}

/**
 * Checks a job envelope against the contract's five rules and returns what to store:
 * kind known (aliases mapped), exactly one of body/body_b64, no body_b64 for chat, content_type with
 * body_b64, chat validated against the chat schema (and its `stream` dropped: jobs never stream).
 */
export function acceptEnvelope(text: string, w: Workload): AcceptedJob {
  return checkEnvelope(parseEnvelope(text), w);
}

/** The envelope rules on a parsed envelope; `body` is stored as sent unless `stream` must be dropped. */
export function checkEnvelope({ value: e, text }: Envelope, w: Workload): AcceptedJob {
  const unknown = Object.keys(e).find((k) => !ENVELOPE_FIELDS.has(k));
  if (unknown)
    throw validation(
      unknown,
      `unknown field "${unknown}" (a job envelope has kind, body or body_b64, content_type, context)`,
    );
  if (typeof e.kind !== "string") throw validation("kind", `is required; accepted kinds: ${ACCEPTED_KINDS.join(", ")}`);
  const kind = canonicalKind(e.kind);
  if (!kind) throw badRequest("invalid_kind", `unknown kind "${e.kind}"; accepted kinds: ${ACCEPTED_KINDS.join(", ")}`);
  const hasBody = e.body !== undefined;
  const hasB64 = e.body_b64 !== undefined;
  if (hasBody === hasB64) throw badRequest("invalid_envelope", "send exactly one of body or body_b64");
  if (hasB64 && kind === "chat")
    throw badRequest(
      "invalid_envelope",
      "body_b64 is not accepted for kind chat: send the chat request as JSON in body",
    );
  const raw = rawFields(text, RAW_FIELDS);
  const context = raw.has("context") ? detached(raw.get("context")!) : null;
  if (hasB64) {
    if (typeof e.body_b64 !== "string" || !BASE64.test(e.body_b64))
      throw validation("body_b64", "must be a base64 string");
    if (typeof e.content_type !== "string" || !e.content_type.trim())
      throw validation(
        "content_type",
        "is required with body_b64 (the exact content type of the bytes, with the multipart boundary)",
      );
    return { kind, body: Buffer.from(e.body_b64, "base64"), contentType: e.content_type, context };
  }
  if (!e.body || typeof e.body !== "object" || Array.isArray(e.body))
    throw validation("body", "must be a JSON object (exactly the body the synchronous route takes)");
  const body = e.body as Record<string, unknown>;
  if (kind === "chat") {
    const r = ChatBody.safeParse(body);
    if (!r.success) {
      const issue = r.error.issues[0];
      throw fromSchemaIssue("body", { ...issue, path: ["body", ...(issue.path as (string | number)[])] });
    }
    checkModel(w, body.model);
    if (body.stream !== undefined || body.stream_options !== undefined) {
      const { stream: _ignored, stream_options: _alsoIgnored, ...rest } = body;
      return { kind, body: encoder.encode(JSON.stringify(rest)), contentType: "application/json", context };
    }
  } else if (body.model !== undefined) {
    checkModel(w, body.model);
  }
  return { kind, body: encoder.encode(raw.get("body")!), contentType: "application/json", context };
}

const disabled = (what: string) => new AppError(409, "endpoint_disabled", what);

/** 409 `endpoint_disabled` while the workload's `jobs` toggle is off. */
export function checkJobsOn(w: Workload): void {
  if (!w.endpoints.jobs) throw disabled(`the jobs endpoint of ${w.project_slug}/${w.slug} is switched off`);
}

/** 409 `endpoint_disabled` while the toggle of a job kind's modality is off. */
export function checkKindOn(w: Workload, kind: string): void {
  const toggle = KINDS[kind].toggle;
  if (!w.endpoints[toggle])
    throw disabled(
      `the ${toggle} endpoint of ${w.project_slug}/${w.slug} is switched off, so ${kind} jobs are refused`,
    );
}
