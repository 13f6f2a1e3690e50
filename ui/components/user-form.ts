/**
 * The forms of the Users page: a user's email, name, role and projects (new or edited), and a
 * password (set, generated, or none: then only single sign-on gets them in, so without it configured
 * a password is needed), with the server's refusals at their field (a taken email, an unknown
 * project, a short password) and a warning for a role that would see no project.
 */
import { html } from "htm/preact";
import { useState } from "preact/hooks";
import { api, ApiError } from "../lib/api";
import { useAction, useApi } from "../lib/hooks";
import type { Project, Role, SignInMethods, User } from "../lib/types";
import { useMe } from "../lib/me";
import { FieldError, FormError, invalidAt } from "./ui";

/** The roles with what each may do, as the form explains them. */
export const ROLES: [Role, string][] = [
  [
    "viewer",
    "Viewer: looks at usage, charts, requests and the audit log of their projects (no runtime logs, job results or bodies); changes nothing.",
  ],
  [
    "operator",
    "Operator: runs the workloads, keys and webhooks of their projects (commands within the launch policy, on workers opened to them), reads their logs and jobs, manages models.",
  ],
  [
    "admin",
    "Admin: everything, as the admin token: the machine (any command, workers, join tokens), projects, users, settings.",
  ],
];

/** Passwords the server takes (api-26: at least 12 characters). */
export const MIN_PASSWORD = 12;

/**
 * A random password of 20 letters and digits, for "Generate".
 * @example generatePassword() // → "q7HkT2mWx9LpR4vZbN3c"
 */
export function generatePassword(): string {
  const alphabet = "ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789";
  return [...crypto.getRandomValues(new Uint32Array(20))].map((n) => alphabet[n % alphabet.length]).join("");
}

/** The server's refusal with the field it belongs to, when the answer did not name one (a taken email). */
function atItsField(e: unknown): never {
  if (e instanceof ApiError && !e.field && e.code === "email_taken")
    throw new ApiError(e.status, e.code, e.message, "email", e.requestId);
  throw e;
}

const val = (e: Event) => (e.target as HTMLInputElement).value;

/** A password field with Generate (shown in clear once generated, to copy); `hint` under it. */
export function PasswordField({
  value,
  set,
  error,
  hint,
  label = "Password",
}: {
  value: string;
  set(v: string): void;
  error?: ApiError;
  hint: unknown;
  label?: string;
}) {
  const [shown, setShown] = useState(false);
  const short = value !== "" && value.length < MIN_PASSWORD;
  return html`<label>${label}
    <span class="password-row">
      <input type=${shown ? "text" : "password"} name="password" autocomplete="new-password" value=${value} onInput=${(e: Event) => set(val(e))} ...${invalidAt(error, "password")} />
      <button type="button" class="small" onClick=${() => {
        set(generatePassword());
        setShown(true);
      }}>Generate</button>
    </span>
    <small class="muted">${hint}</small>
    ${short ? html`<small class="field-error">At least ${MIN_PASSWORD} characters.</small>` : null}
    <${FieldError} error=${error} field="password" />
  </label>`;
}

/** The role select and the project checkboxes (not for admins: they see every project). */
function RoleAndProjects({
  role,
  setRole,
  projects,
  setProjects,
  error,
}: {
  role: Role;
  setRole(r: Role): void;
  projects: string[];
  setProjects(p: string[]): void;
  error?: ApiError;
}) {
  const all = useApi<Project[]>("/admin/projects");
  const toggle = (slug: string) =>
    setProjects(projects.includes(slug) ? projects.filter((x) => x !== slug) : [...projects, slug]);
  return html`<label>Role
      <select name="role" value=${role} onChange=${(e: Event) => setRole(val(e) as Role)} ...${invalidAt(error, "role")}>
        ${ROLES.map(([r]) => html`<option value=${r}>${r}</option>`)}</select>
      <small class="muted">${ROLES.find(([r]) => r === role)?.[1]}</small>
      <${FieldError} error=${error} field="role" /></label>
    <fieldset class="user-projects" ...${invalidAt(error, "projects")}><legend>Projects</legend>
      ${
        role === "admin"
          ? html`<p class="muted">An admin sees and changes every project.</p>`
          : !all.data
            ? html`<p class="muted">Loading projects…</p>`
            : all.data.length === 0
              ? html`<p class="muted">No projects yet.</p>`
              : all.data.map(
                  (p) =>
                    html`<label class="check"><input type="checkbox" name="projects" value=${p.slug} checked=${projects.includes(p.slug)} onChange=${() => toggle(p.slug)} /> ${p.name} <code class="muted">${p.slug}</code></label>`,
                )
      }
      <${FieldError} error=${error} field="projects" alert />
    </fieldset>`;
}

/**
 * Why a new user could never sign in, or nothing: without a password only single sign-on gets them
 * in, and none is configured here. The form warns before Add user (single sign-on may be configured
 * later, and a password set with Reset password), and the card after it says so again.
 * @example cannotSignIn("", false) // → "No single sign-on is set up on this server: without a password …"
 */
export function cannotSignIn(password: string, sso: boolean): string | null {
  if (password || sso) return null;
  return "No single sign-on is set up on this server: without a password this person can never sign in. Set one (Generate makes one to pass on), or give them one later with Reset password.";
}

/**
 * What a viewer or operator without a project meets after signing in: nothing to see. A warning,
 * not a refusal: projects can be given later (Edit).
 */
export const seesNothing = (role: Role, projects: string[]) =>
  role !== "admin" && projects.length === 0
    ? `A ${role} sees only their projects: with none ticked they can sign in but see nothing until you add them to one (Edit).`
    : null;

/**
 * A new user (`user` absent: with email and password) or an edited one (name, role, projects).
 * `onSaved` gets the server's answer and the password that was set, to show once. A new user who
 * could never sign in (no password, no single sign-on here) is warned of before Add user.
 */
export function UserForm({
  user,
  onSaved,
  onCancel,
}: {
  user?: User;
  onSaved(u: User, password: string): unknown;
  onCancel(): void;
}) {
  const [email, setEmail] = useState(user?.email ?? "");
  const [name, setName] = useState(user?.name ?? "");
  const [role, setRole] = useState<Role>(user?.role ?? "viewer");
  const [projects, setProjects] = useState<string[]>(user?.projects ?? []);
  const [password, setPassword] = useState("");
  const methods = useApi<SignInMethods>(user ? null : "/admin/session/methods");
  const sso = !!methods.data?.oidc;
  const never = !user && methods.data ? cannotSignIn(password, sso) : null;
  const nothing = seesNothing(role, projects);
  const save = useAction((body: Record<string, unknown>) =>
    (user
      ? api<User>(`/admin/users/${encodeURIComponent(user.id)}`, { method: "PATCH", body })
      : api<User>("/admin/users", { body })
    ).catch(atItsField),
  );
  const submit = async (e: Event) => {
    e.preventDefault();
    const body = {
      name: name.trim(),
      role,
      projects: role === "admin" ? [] : projects,
      ...(user ? {} : { email: email.trim() }),
      ...(!user && password ? { password } : {}),
    };
    const saved = await save.run(body);
    if (saved) await onSaved(saved, user ? "" : password);
  };
  const bad = !user && password !== "" && password.length < MIN_PASSWORD;
  return html`<form class="form user-form" onSubmit=${submit} aria-label=${user ? `Edit ${user.email}` : "Add a user"}>
    <${FormError} error=${save.error} />
    ${
      user
        ? null
        : html`<label>Email<input type="email" name="email" required value=${email} onInput=${(e: Event) => setEmail(val(e))} ...${invalidAt(save.error, "email")} />
      <${FieldError} error=${save.error} field="email" /></label>`
    }
    <label>Name <small class="muted">(optional)</small><input name="name" value=${name} onInput=${(e: Event) => setName(val(e))} ...${invalidAt(save.error, "name")} />
      <${FieldError} error=${save.error} field="name" /></label>
    <${RoleAndProjects} role=${role} setRole=${setRole} projects=${projects} setProjects=${setProjects} error=${save.error} />
    ${
      user
        ? null
        : html`<${PasswordField} value=${password} set=${setPassword} error=${save.error}
      hint=${sso ? html`Optional. <strong>Without a password this person can sign in only with single sign-on${methods.data?.oidc ? ` (${methods.data.oidc.label})` : ""}.</strong> You will see the password once, to pass on.` : html`No single sign-on is set up here, so they need a password to sign in. You will see it once, to pass on with the sign-in address.`} />
      ${never ? html`<p class="note warn" role="note" data-testid="never-signs-in">${never}</p>` : null}`
    }
    ${nothing ? html`<p class="note warn" role="note" data-testid="sees-nothing">${nothing}</p>` : null}
    <div class="actions">
      <button type="button" onClick=${onCancel}>Cancel</button>
      <button type="submit" class="primary" disabled=${save.busy || bad || (!user && !email.trim())}>${user ? "Save user" : "Add user"}</button>
    </div>
  </form>`;
}

/**
 * Sets a new password for `user`; `onSaved` gets it, to show once. For the signed-in user's own
 * password it asks for the current one too (the server needs it: api-32).
 */
export function PasswordForm({
  user,
  onSaved,
  onCancel,
}: {
  user: User;
  onSaved(password: string): unknown;
  onCancel(): void;
}) {
  const [password, setPassword] = useState("");
  const [current, setCurrent] = useState("");
  const own = useMe()?.user?.id === user.id;
  const save = useAction((p: string) =>
    api<User>(`/admin/users/${encodeURIComponent(user.id)}`, {
      method: "PATCH",
      body: { password: p, ...(own ? { current_password: current } : {}) },
    }),
  );
  const submit = async (e: Event) => {
    e.preventDefault();
    if (await save.run(password)) await onSaved(password);
  };
  return html`<form class="form" onSubmit=${submit} aria-label=${`New password for ${user.email}`}>
    <${FormError} error=${save.error} />
    ${
      own
        ? html`<label>Your current password
      <input type="password" name="current_password" autocomplete="current-password" value=${current} onInput=${(e: Event) => setCurrent(val(e))} ...${invalidAt(save.error, "current_password")} />
      <${FieldError} error=${save.error} field="current_password" />
    </label>`
        : null
    }
    <${PasswordField} label="New password" value=${password} set=${setPassword} error=${save.error} hint=${`At least ${MIN_PASSWORD} characters; Generate makes one to copy and pass on.`} />
    <div class="actions">
      <button type="button" onClick=${onCancel}>Cancel</button>
      <button type="submit" class="primary" disabled=${save.busy || password.length < MIN_PASSWORD || (own && !current)}>Set password</button>
    </div>
  </form>`;
}
