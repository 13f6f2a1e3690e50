import { z } from "zod";
import { badRequest, fromSchemaIssue, validation } from "../errors";
import type { Workload } from "../workloads/service";
import { checkModel } from "../dataplane/service";
import { ACCEPTED_KINDS, canonicalKind } from "./kinds";
import { rawField } from "./raw";
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

/**
 * Checks a job envelope against the contract's five rules and returns what to store:
 * kind known (aliases mapped), exactly one of body/body_b64, no body_b64 for chat, content_type with
 * body_b64, chat validated against the chat schema (and its `stream` dropped: jobs never stream).
 */
export function acceptEnvelope(text: string, w: Workload): AcceptedJob {
  const env = parseJsonBytes(text);
  if (!env || typeof env !== "object" || Array.isArray(env)) throw validation("body", "the job envelope must be a JSON object");
  const e = env as Record<string, unknown>;
  const unknown = Object.keys(e).find((k) => !ENVELOPE_FIELDS.has(k));
  if (unknown) throw validation(unknown, `unknown field "${unknown}" (a job envelope has kind, body or body_b64, content_type, context)`);
  if (typeof e.kind !== "string") throw validation("kind", `is required; accepted kinds: ${ACCEPTED_KINDS.join(", ")}`);
  const kind = canonicalKind(e.kind);
  if (!kind) throw badRequest("invalid_kind", `unknown kind "${e.kind}"; accepted kinds: ${ACCEPTED_KINDS.join(", ")}`);
  const hasBody = e.body !== undefined;
  const hasB64 = e.body_b64 !== undefined;
  if (hasBody === hasB64) throw badRequest("invalid_envelope", "send exactly one of body or body_b64");
  if (hasB64 && kind === "chat") throw badRequest("invalid_envelope", "body_b64 is not accepted for kind chat: send the chat request as JSON in body");
  const context = rawField(text, "context") ?? null;
  if (hasB64) {
    if (typeof e.body_b64 !== "string" || !BASE64.test(e.body_b64)) throw validation("body_b64", "must be a base64 string");
    if (typeof e.content_type !== "string" || !e.content_type.trim()) throw validation("content_type", "is required with body_b64 (the exact content type of the bytes, with the multipart boundary)");
    return { kind, body: Buffer.from(e.body_b64, "base64"), contentType: e.content_type, context };
  }
  if (!e.body || typeof e.body !== "object" || Array.isArray(e.body)) throw validation("body", "must be a JSON object (exactly the body the synchronous route takes)");
  let body = e.body as Record<string, unknown>;
  if (kind === "chat") {
    const r = ChatBody.safeParse(body);
    if (!r.success) {
      const issue = r.error.issues[0];
      throw fromSchemaIssue("body", { ...issue, path: ["body", ...(issue.path as (string | number)[])] });
    }
    checkModel(w, body.model);
    const { stream: _ignored, stream_options: _alsoIgnored, ...rest } = body;
    body = rest;
  } else if (body.model !== undefined) {
    checkModel(w, body.model);
  }
  return { kind, body: new TextEncoder().encode(JSON.stringify(body)), contentType: "application/json", context };
}
