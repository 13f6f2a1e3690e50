import { z } from "zod";
import { SLUG_RE } from "../ids";

/** A slug as accepted from users: lower-case letters, digits and inner hyphens, 1–63 characters. */
export const Slug = z.string().regex(SLUG_RE, "must be 1-63 lower-case letters, digits or inner hyphens");

/** Body of `POST /admin/projects`. */
export const ProjectCreate = z.strictObject({
  name: z.string().trim().min(1).max(200),
  slug: Slug.optional(),
});
export type ProjectCreate = z.infer<typeof ProjectCreate>;
