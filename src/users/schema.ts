/** Request bodies of the users API and sign-in (the schema is the type). */
import { z } from "zod";

/** What a person may do: `admin` everything, `operator` run their projects, `viewer` look at them. */
export const Role = z.enum(["admin", "operator", "viewer"]);
export type Role = z.infer<typeof Role>;

/** An e-mail address as accepted from people (the service keeps it lower-cased). */
const Email = z
  .string()
  .trim()
  .max(320)
  .regex(/^[^\s@]+@[^\s@]+$/, "must be an e-mail address");
/** A new password: 12 characters at least. */
const Password = z.string().min(12, "must be at least 12 characters").max(1000);
/** Project slugs a user belongs to. */
const Projects = z.array(z.string().min(1).max(200)).max(1000);

/** Body of `POST /admin/users`. */
export const UserCreate = z.strictObject({
  email: Email,
  name: z.string().trim().max(200).optional(),
  role: Role,
  password: Password.optional(),
  projects: Projects.optional(),
});
export type UserCreate = z.infer<typeof UserCreate>;

/** Body of `PATCH /admin/users/:id` (a user on themself: `name` and `password` only, the latter with `current_password`). */
export const UserPatch = z.strictObject({
  name: z.string().trim().max(200).optional(),
  role: Role.optional(),
  password: Password.optional(),
  /** The user's own password now: needed to change one's own password (not an admin's reset of another's). */
  current_password: z.string().max(1000).optional(),
  projects: Projects.optional(),
});
export type UserPatch = z.infer<typeof UserPatch>;

/** Body of `POST /admin/session`: the admin token, or a local user's e-mail and password. */
export const SessionCreate = z.union([
  z.strictObject({ token: z.string().min(1).max(1000) }),
  z.strictObject({ email: z.string().trim().min(1).max(320), password: z.string().min(1).max(1000) }),
]);
export type SessionCreate = z.infer<typeof SessionCreate>;
