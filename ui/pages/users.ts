/**
 * Users (admins only): who may sign in, with which role and projects, how (password or single
 * sign-on), when they last did and how many sessions they have; add, edit, reset a password, end
 * sessions, remove.
 */
import { html } from "htm/preact";
import type { ComponentChildren } from "preact";
import { useId, useRef, useState } from "preact/hooks";
import { api } from "../lib/api";
import { useAction, useApi } from "../lib/hooks";
import { ago, when } from "../lib/format";
import { Can, useMe } from "../lib/me";
import type { SignInMethods, User } from "../lib/types";
import { ConfirmButton, CopyButton, ErrorNote, Loading, PageTitle } from "../components/ui";
import { clientOrigin, useListen } from "../components/listen-note";
import { PasswordForm, UserForm } from "../components/user-form";
import { SessionList } from "../components/sessions";

/**
 * A button opening a modal dialog whose content is made afresh each time it opens (`render` gets `close`).
 * @example html`<${DialogButton} label="Edit" title="Edit the user" render=${(close) => html`<${Form} onCancel=${close} />`} />`
 */
function DialogButton({
  label,
  title,
  name,
  primary,
  render,
}: {
  label: string;
  title: string;
  name?: string;
  primary?: boolean;
  render(close: () => void): ComponentChildren;
}) {
  const dialog = useRef<HTMLDialogElement>(null);
  const [open, setOpen] = useState(0);
  const id = useId();
  const close = () => {
    dialog.current?.close();
    setOpen(0);
  };
  return html`<button type="button" class=${primary ? "primary" : "small"} aria-label=${name} onClick=${() => {
    setOpen(open + 1);
    dialog.current?.showModal();
  }}>${label}</button>
    <dialog ref=${dialog} aria-labelledby=${id} class="user-dialog" onClose=${() => setOpen(0)}>
      <h2 id=${id}>${title}</h2>
      ${open ? render(close) : null}
    </dialog>`;
}

/** A password shown once after it was set, to pass on ("" when a user was added without one). */
type Fresh = { email: string; password: string; userId: string };

/**
 * The one-time card after adding a user or setting a password: whose password it is (the admin's own
 * only when it is), the sign-in address to pass on with it, or, for a user added without a password,
 * how they sign in (single sign-on) or that they cannot until one is set.
 */
function PasswordOnce({ fresh, onDone }: { fresh: Fresh; onDone(): void }) {
  const me = useMe();
  const own = !!me?.user && me.user.id === fresh.userId;
  const address = clientOrigin(useListen());
  const methods = useApi<SignInMethods>(fresh.password ? null : "/admin/session/methods");
  const id = useId();
  const where = html`<div class="secret-row"><code class="secret-value" data-testid="signin-address">${address}</code><${CopyButton} text=${address} label="Copy address" /></div>`;
  if (!fresh.password)
    return html`<section class="secret" aria-labelledby=${id} data-testid="user-added">
      <h3 id=${id}>${fresh.email} was added without a password</h3>
      ${
        methods.data?.oidc
          ? html`<p>They sign in with single sign-on (${methods.data.oidc.label}) at this address:</p>${where}`
          : methods.data
            ? html`<p class="warn" data-testid="cannot-sign-in"><strong>They cannot sign in yet:</strong> no single sign-on is set up on this server. Give them a password with <strong>Reset password</strong> in their row.</p>`
            : null
      }
      <button type="button" onClick=${onDone}>Done</button>
    </section>`;
  return html`<section class="secret" aria-labelledby=${id} data-testid="password-once">
    <h3 id=${id}>${own ? "Your new password" : `Password for ${fresh.email}`}</h3>
    <p class="warn"><strong>Copy it now: you will not see this again.</strong> inferd keeps only a hash of it.</p>
    <div class="secret-row"><code class="secret-value" data-testid="secret">${fresh.password}</code><${CopyButton} text=${fresh.password} label="Copy password" /></div>
    <p>${own ? "You sign in" : html`Pass it on with the sign-in address: they sign in`} at this address with ${own ? "your" : "their"} email (<code>${fresh.email}</code>) and this password.</p>
    ${where}
    <button type="button" onClick=${onDone}>I have copied it</button>
  </section>`;
}

/** One user's row: what they are and the actions on them. */
function UserRow({ u, onChanged, onPassword }: { u: User; onChanged(): unknown; onPassword(f: Fresh): void }) {
  const remove = useAction(() =>
    api(`/admin/users/${encodeURIComponent(u.id)}`, { method: "DELETE" }).then(() => true),
  );
  return html`<tr data-testid="user-row">
    <td><strong class="wrap">${u.email}</strong>${u.name ? html`<br /><span class="muted">${u.name}</span>` : null}</td>
    <td><span class=${`badge role-${u.role}`}>${u.role}</span></td>
    <td class="wrap">${u.role === "admin" ? html`<span class="muted">all</span>` : u.projects.length ? u.projects.map((p, i) => html`${i ? ", " : ""}<a href=${`/projects/${p}`}><code>${p}</code></a>`) : html`<span class="muted">none</span>`}</td>
    <td>${u.source === "oidc" ? "SSO" : "local"}</td>
    <td>${u.last_sign_in_at ? html`<time datetime=${u.last_sign_in_at} title=${when(u.last_sign_in_at)}>${ago(u.last_sign_in_at)}</time>` : html`<span class="muted">never</span>`}</td>
    <td class="num">${u.sessions}</td>
    <td><div class="row-actions">
      <${DialogButton} label="Edit" name=${`Edit ${u.email}`} title=${`Edit ${u.email}`}
        render=${(close: () => void) =>
          html`<${UserForm} user=${u} onCancel=${close} onSaved=${async () => {
            close();
            await onChanged();
          }} />`} />
      <${DialogButton} label="Reset password" name=${`Reset the password of ${u.email}`} title=${`New password for ${u.email}`}
        render=${(close: () => void) =>
          html`<${PasswordForm} user=${u} onCancel=${close} onSaved=${async (password: string) => {
            close();
            onPassword({ email: u.email, password, userId: u.id });
            await onChanged();
          }} />`} />
      <${DialogButton} label="Sessions" name=${`Sessions of ${u.email}`} title=${`Sessions of ${u.email}`}
        render=${(close: () => void) => html`<${SessionList} userId=${u.id} onChanged=${onChanged} /><div class="actions"><button type="button" onClick=${close}>Close</button></div>`} />
      <${ConfirmButton} class="danger small" label="Remove" title=${`Remove ${u.email}?`} confirm="Remove user" onConfirm=${async () => (await remove.run()) && onChanged()}
        body=${html`<p>${u.email} is signed out at once and can no longer sign in. What they did stays in the audit log.</p>`} />
    </div><${ErrorNote} error=${remove.error} /></td>
  </tr>`;
}

/** The users page. */
export function UsersPage() {
  return html`<${PageTitle} sub="People who sign in to this dashboard, their role and their projects. The admin token still works for scripts and as the way in when no one else can.">Users<//>
    <${Can} do="users" note><${Users} /><//>`;
}

/** The list and the Add user dialog. */
function Users() {
  const list = useApi<User[]>("/admin/users", 10_000);
  const [fresh, setFresh] = useState<Fresh>();
  const reload = () => list.reload();
  return html`<div class="users-head">
      <${DialogButton} primary label="Add user" title="Add a user" render=${(
        close: () => void,
      ) => html`<${UserForm} onCancel=${close}
        onSaved=${async (u: User, password: string) => {
          close();
          setFresh({ email: u.email, password, userId: u.id });
          await reload();
        }} />`} />
    </div>
    ${fresh ? html`<${PasswordOnce} key=${`${fresh.userId}:${fresh.password}`} fresh=${fresh} onDone=${() => setFresh(undefined)} />` : null}
    ${
      list.error
        ? html`<${ErrorNote} error=${list.error} />`
        : !list.data
          ? html`<${Loading} />`
          : list.data.length === 0
            ? html`<p class="muted">No users yet: only the admin token gets in. Add one above, or let people sign in with single sign-on (<code>--oidc-issuer</code>).</p>`
            : html`<div class="table-wrap"><table class="users">
          <thead><tr><th scope="col">User</th><th scope="col">Role</th><th scope="col">Projects</th><th scope="col">Signs in with</th><th scope="col">Last sign-in</th><th scope="col">Sessions</th><th scope="col"><span class="offscreen">Actions</span></th></tr></thead>
          <tbody>${list.data.map((u) => html`<${UserRow} key=${u.id} u=${u} onChanged=${reload} onPassword=${setFresh} />`)}</tbody>
        </table></div>`
    }`;
}
