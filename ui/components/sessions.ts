/** A user's dashboard sessions: how each signed in, from which browser, when; revoke one, or all the others. */
import { html } from "htm/preact";
import { api } from "../lib/api";
import { useAction, useApi } from "../lib/hooks";
import { ago, when } from "../lib/format";
import type { UserSession } from "../lib/types";
import { ErrorNote, Loading } from "./ui";

/** Sign-in methods in words. */
const METHODS: Record<string, string> = {
  password: "Password",
  oidc: "Single sign-on",
  token: "Admin token",
  admin_token: "Admin token",
  login_link: "Desktop window",
};

/**
 * A browser's user-agent string in short words.
 * @example browserOf("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36") // → "Chrome on Linux"
 */
export function browserOf(ua: string | null): string {
  if (!ua) return "unknown browser";
  const name = /Edg\//.test(ua)
    ? "Edge"
    : /Firefox\//.test(ua)
      ? "Firefox"
      : /Chrom(e|ium)\//.test(ua)
        ? "Chrome"
        : /Safari\//.test(ua)
          ? "Safari"
          : /curl\//.test(ua)
            ? "curl"
            : ua.split(/[ /]/)[0] || "unknown browser";
  const os = /Android/.test(ua)
    ? "Android"
    : /iPhone|iPad/.test(ua)
      ? "iOS"
      : /Mac OS X/.test(ua)
        ? "macOS"
        : /Windows/.test(ua)
          ? "Windows"
          : /Linux/.test(ua)
            ? "Linux"
            : "";
  return os ? `${name} on ${os}` : name;
}

/** A time as "3 min ago" with the exact time on hover. */
const At = ({ iso }: { iso: string | null }) =>
  iso ? html`<time datetime=${iso} title=${when(iso)}>${ago(iso)}</time>` : html`<span class="muted">–</span>`;

/**
 * The sessions of user `userId` with Revoke per session and a button ending all but this browser's
 * (`mine`: the signed-in user's own list) or all of them (an admin looking at someone else's).
 */
export function SessionList({ userId, mine, onChanged }: { userId: string; mine?: boolean; onChanged?(): unknown }) {
  const base = `/admin/users/${encodeURIComponent(userId)}/sessions`;
  const list = useApi<UserSession[]>(base);
  const done = async () => {
    await list.reload();
    await onChanged?.();
  };
  const revoke = useAction((id: string) =>
    api(`${base}/${encodeURIComponent(id)}`, { method: "DELETE" }).then(() => true),
  );
  const others = useAction(async (ids: string[]) => {
    if (!mine) return api(base, { method: "DELETE" }).then(() => true);
    for (const id of ids) await api(`${base}/${encodeURIComponent(id)}`, { method: "DELETE" });
    return true;
  });
  if (list.error) return html`<${ErrorNote} error=${list.error} />`;
  if (!list.data) return html`<${Loading} />`;
  const rest = list.data.filter((s) => !s.current).map((s) => s.id);
  return html`<div class="sessions">
    <${ErrorNote} error=${revoke.error ?? others.error} />
    ${
      list.data.length === 0
        ? html`<p class="muted">No session: signed out everywhere.</p>`
        : html`<div class="table-wrap"><table>
      <thead><tr><th scope="col">Signed in with</th><th scope="col">Browser</th><th scope="col">Started</th><th scope="col">Last seen</th><th scope="col"><span class="offscreen">Actions</span></th></tr></thead>
      <tbody>${list.data.map(
        (s) => html`<tr key=${s.id} data-testid="session-row">
        <td>${METHODS[s.method] ?? s.method}${s.current ? html` <span class="badge state-ready">this one</span>` : null}</td>
        <td title=${s.user_agent ?? ""}>${browserOf(s.user_agent)}</td><td><${At} iso=${s.created_at} /></td><td><${At} iso=${s.last_seen_at} /></td>
        <td>${
          s.current
            ? null
            : html`<button type="button" class="small danger" disabled=${revoke.busy} aria-label=${`Revoke the session of ${browserOf(s.user_agent)} started ${ago(s.created_at)}`}
          onClick=${async () => (await revoke.run(s.id)) && done()}>Revoke</button>`
        }</td></tr>`,
      )}</tbody>
    </table></div>`
    }
    ${
      (mine ? rest.length : list.data.length)
        ? html`<div class="actions"><button type="button" disabled=${others.busy} onClick=${async () => (await others.run(rest)) && done()}>
      ${mine ? "Sign out other sessions" : "End all sessions"}</button></div>`
        : null
    }
  </div>`;
}
