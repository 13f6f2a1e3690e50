/** Sign-in with the admin token, which inferd printed when it first started. */
import { html } from "htm/preact";
import { useState } from "preact/hooks";
import { signIn } from "../lib/api";
import { useAction } from "../lib/hooks";
import { ErrorNote } from "../components/ui";

/** The sign-in screen. */
export function SignIn({ onSignedIn }: { onSignedIn(): void }) {
  const [token, setToken] = useState("");
  const action = useAction(async (t: string) => {
    await signIn(t);
    return true;
  });
  const submit = async (e: Event) => {
    e.preventDefault();
    if (await action.run(token)) onSignedIn();
  };
  return html`<main class="signin" id="main">
    <form class="card" onSubmit=${submit} aria-labelledby="signin-title">
      <h1 id="signin-title"><span class="logo" aria-hidden="true"></span>Sign in to inferd</h1>
      <p>Paste the <strong>admin token</strong> that <code>inferd serve</code> printed the first time it started.
        It is also saved in the file <code>admin-token</code> in inferd's data folder (<code>~/.inferd/admin-token</code> unless you chose another).</p>
      <label>Admin token
        <input type="password" name="token" autocomplete="current-password" required value=${token} onInput=${(e: Event) => setToken((e.target as HTMLInputElement).value)} placeholder="ik_admin_…" autofocus />
      </label>
      <${ErrorNote} error=${action.error} />
      <button type="submit" class="primary" disabled=${action.busy || !token.trim()}>Sign in</button>
    </form>
  </main>`;
}
