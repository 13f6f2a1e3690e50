/** My sessions: the signed-in user's dashboard sessions, to revoke one or sign out the others. */
import { html } from "htm/preact";
import { useMe } from "../lib/me";
import { Loading, PageTitle } from "../components/ui";
import { SessionList } from "../components/sessions";

/** The My sessions page (the admin token has no sessions of its own to list). */
export function MySessions() {
  const me = useMe();
  if (!me) return html`<${Loading} />`;
  return html`<${PageTitle} sub=${me.user ? html`Every browser signed in as <strong>${me.user.email}</strong>. Revoking one signs it out on its next request.` : null}>My sessions<//>
    ${
      me.user
        ? html`<${SessionList} userId=${me.user.id} mine />`
        : html`<p class="muted">You signed in with the admin token, which is no user: it has no sessions to list here. "Sign out everywhere" in the menu ends every dashboard session.</p>`
    }`;
}
