/** Where inferd listens: a plain warning when only this machine can reach it, else the LAN address. */
import { html } from "htm/preact";
import { useEffect, useState } from "preact/hooks";
import { api } from "../lib/api";
import type { Info, Listen } from "../lib/types";

let cached: Promise<Info | undefined> | undefined;

/** The server's info, read once per page load (undefined until known or when unreadable). */
function useInfoOnce(): Info | undefined {
  const [info, setInfo] = useState<Info>();
  useEffect(() => {
    cached ??= api<Info>("/admin/info").catch(() => (cached = undefined));
    let live = true;
    void cached.then((i) => live && setInfo(i));
    return () => void (live = false);
  }, []);
  return info;
}

/** The server's listen info (undefined until known or when unreadable). */
export const useListen = (): Listen | undefined => useInfoOnce()?.listen;

/** How the server was started (`inferd`, `bun run start --`…): the prefix of the commands the dashboard prints. */
export const useCommand = (): string => useInfoOnce()?.command ?? "inferd";

/** The base URL clients elsewhere should use: the LAN URL, else this page's origin. */
export const clientOrigin = (listen: Listen | undefined) => listen?.url ?? location.origin;

/**
 * The loopback-only warning with the exact restart command (nothing otherwise, unless `lan` asks
 * for the address other machines use).
 */
export function ListenNote({ listen, lan }: { listen: Listen | undefined; lan?: string }) {
  const command = useCommand();
  if (!listen) return null;
  if (listen.loopback_only && !listen.url)
    return html`<div class="note warn listen-warn" role="note" data-testid="listen-warning">
      <p><strong>inferd listens on ${listen.host} only: other machines cannot connect to it.</strong></p>
      <p>To serve your network, restart it with <code>${command} serve ${listen.restart?.flag ?? "--host 0.0.0.0"}</code> (or set <code>${listen.restart?.env ?? "INFERD_HOST=0.0.0.0"}</code>).</p>
    </div>`;
  return lan ? html`<p class="muted" data-testid="listen-lan">${lan} <code>${listen.url}</code>.</p>` : null;
}
