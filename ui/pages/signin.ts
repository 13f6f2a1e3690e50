/**
 * Sign-in: a user's email and password first, single sign-on when the server has an OpenID provider
 * (a plain link to its start, coming back where the person was going), and the admin token folded
 * away as the break-glass way in. Refusals show in place: a wrong email or password, too many tries
 * (with the seconds left), and a failed single sign-on (`/signin?error=…`).
 */
import { html } from "htm/preact";
import { useState } from "preact/hooks";
import { signIn, type ApiError, type Credentials } from "../lib/api";
import { useAction, useApi, useNow } from "../lib/hooks";
import type { SignInMethods } from "../lib/types";
import { ErrorNote } from "../components/ui";

const SSO_PENDING = "inferd.ssoPending";

/**
 * Whether this browser just came back from the single sign-on provider (it left by the link below and
 * the provider did not send it back with an error): the app then asks the server who is signed in.
 * Forgets the mark.
 */
export function takeSsoReturn(): boolean {
  const pending = localStorage.getItem(SSO_PENDING) === "1";
  localStorage.removeItem(SSO_PENDING);
  return pending && !new URLSearchParams(location.search).has("error");
}

/** Where to come back to after signing in: the page asked for, or the overview from the sign-in page itself. */
export function returnTo(): string {
  if (location.pathname === "/signin") return new URLSearchParams(location.search).get("return_to") ?? "/";
  return location.pathname + location.search;
}

const val = (e: Event) => (e.target as HTMLInputElement).value;

/** A sign-in refusal as the page says it: too many tries counts down the seconds left. */
function Refusal({ error, at }: { error?: ApiError; at: number }) {
  const now = useNow();
  if (error?.code !== "too_many_attempts") return html`<${ErrorNote} error=${error} />`;
  const left = Math.max(0, Math.ceil((at + (error.retryAfter ?? 0) * 1000 - now) / 1000));
  return html`<p class="note error" role="alert" data-testid="too-many">Too many failed sign-ins. ${left > 0 ? `Try again in ${left} s.` : "You can try again now."}</p>`;
}

/** One sign-in form's action, remembering when it was refused (for the countdown). */
function useSignIn(onSignedIn: () => void) {
  const [at, setAt] = useState(0);
  const action = useAction(async (c: Credentials) => {
    setAt(Date.now());
    await signIn(c);
    return true;
  });
  const run = async (c: Credentials) => {
    if (await action.run(c)) onSignedIn();
  };
  return { run, at, busy: action.busy, error: action.error };
}

/** The email and password form. */
function PasswordForm({ onSignedIn }: { onSignedIn(): void }) {
  const [email, setEmail] = useState("");
  const [password, setPassword] = useState("");
  const go = useSignIn(onSignedIn);
  const submit = (e: Event) => {
    e.preventDefault();
    void go.run({ email, password });
  };
  return html`<form onSubmit=${submit}>
    <label>Email<input type="email" name="email" autocomplete="username" required value=${email} onInput=${(e: Event) => setEmail(val(e))} autofocus /></label>
    <label>Password<input type="password" name="password" autocomplete="current-password" required value=${password} onInput=${(e: Event) => setPassword(val(e))} /></label>
    <${Refusal} error=${go.error} at=${go.at} />
    <button type="submit" class="primary" disabled=${go.busy || !email.trim() || !password}>Sign in</button>
  </form>`;
}

/** The admin token form (break-glass), folded away. */
function TokenForm({ onSignedIn }: { onSignedIn(): void }) {
  const [token, setToken] = useState("");
  const go = useSignIn(onSignedIn);
  const submit = (e: Event) => {
    e.preventDefault();
    void go.run({ token });
  };
  return html`<details class="token-signin">
    <summary>Use the admin token</summary>
    <form onSubmit=${submit}>
      <p>Paste the <strong>admin token</strong> that <code>inferd serve</code> printed the first time it started.
        It is also saved in the file <code>admin-token</code> in inferd's data folder (<code>~/.inferd/admin-token</code> unless you chose another).
        It can do everything: keep it for the first start, scripts, and when no one else can get in.</p>
      <label>Admin token
        <input type="password" name="token" autocomplete="off" required value=${token} onInput=${(e: Event) => setToken(val(e))} placeholder="ik_admin_…" />
      </label>
      <${Refusal} error=${go.error} at=${go.at} />
      <button type="submit" disabled=${go.busy || !token.trim()}>Sign in with the admin token</button>
    </form>
  </details>`;
}

/** The sign-in screen. */
export function SignIn({ onSignedIn }: { onSignedIn(): void }) {
  const methods = useApi<SignInMethods>("/admin/session/methods");
  const failed = location.pathname === "/signin" ? new URLSearchParams(location.search).get("error") : null;
  const oidc = methods.data?.oidc;
  const start = oidc ? `${oidc.start}?return_to=${encodeURIComponent(returnTo())}` : "";
  return html`<main class="signin" id="main">
    <div class="card signin-card">
      <h1 id="signin-title"><span class="logo" aria-hidden="true"></span>Sign in to inferd</h1>
      ${failed ? html`<p class="note error" role="alert" data-testid="sso-error">Single sign-on did not work: ${failed}</p>` : null}
      ${
        oidc
          ? html`<a class="button primary sso" href=${start} onClick=${() => localStorage.setItem(SSO_PENDING, "1")}>${oidc.label}</a>
        <p class="or muted" aria-hidden="true">or</p>`
          : null
      }
      <${PasswordForm} onSignedIn=${onSignedIn} />
      <${TokenForm} onSignedIn=${onSignedIn} />
    </div>
  </main>`;
}
