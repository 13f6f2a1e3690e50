import { z } from "zod";
import { KeyLimits } from "../limits/schema";

/** Body of `POST /admin/projects/:project/keys`. */
export const KeyCreate = z.strictObject({
  name: z.string().trim().min(1).max(200),
  type: z.enum(["sdk", "live"]),
  scope: z.enum(["project", "endpoints"]).optional(),
  endpoints: z.array(z.string().min(3).max(200)).max(1000).optional(),
  /** Optional limits: rpm, tpm, max_concurrent, tokens_per_day, tokens_per_month, priority, weight. */
  limits: KeyLimits.optional(),
});
export type KeyCreate = z.infer<typeof KeyCreate>;
