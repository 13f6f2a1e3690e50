import { createHmac, randomBytes } from "node:crypto";

/** A new signing secret in the Standard Webhooks form: `whsec_` + base64 of 32 random bytes. */
export const newSigningSecret = () => `whsec_${randomBytes(32).toString("base64")}`;

/**
 * The contract's `X-Service-Signature`: `t=<unix>,v1=<hex HMAC-SHA256 of "<t>.<body>">`, keyed with
 * the secret as written — the scheme Stripe's `webhooks.constructEvent` verifies.
 * @example serviceSignature("whsec_abc", 1700000000, '{"a":1}') // → "t=1700000000,v1=…"
 */
export function serviceSignature(secret: string, t: number, body: string): string {
  return `t=${t},v1=${createHmac("sha256", secret).update(`${t}.${body}`).digest("hex")}`;
}

/**
 * The Standard Webhooks `webhook-signature`: `v1,<base64 HMAC-SHA256 of "<id>.<t>.<body>">`, keyed
 * with the base64-decoded part of the secret after `whsec_`.
 */
export function standardSignature(secret: string, id: string, t: number, body: string): string {
  const key = Buffer.from(secret.replace(/^whsec_/, ""), "base64");
  return `v1,${createHmac("sha256", key).update(`${id}.${t}.${body}`).digest("base64")}`;
}

/** Every header of a delivery or ping, signed both ways. */
export function deliveryHeaders(opts: {
  secret: string | null;
  event: "job" | "batch" | "ping";
  jobId?: string;
  batchId?: string;
  messageId: string;
  body: string;
  now?: number;
}): Record<string, string> {
  const t = Math.floor((opts.now ?? Date.now()) / 1000);
  const h: Record<string, string> = {
    "content-type": "application/json",
    "user-agent": "inferd-webhooks/1",
    "x-service-event": opts.event,
    "webhook-id": opts.messageId,
    "webhook-timestamp": String(t),
  };
  if (opts.jobId) h["x-service-job-id"] = opts.jobId;
  if (opts.batchId) h["x-service-batch-id"] = opts.batchId;
  if (opts.secret) {
    h["x-service-signature"] = serviceSignature(opts.secret, t, opts.body);
    h["webhook-signature"] = standardSignature(opts.secret, opts.messageId, t, opts.body);
  }
  return h;
}
