/** "Not found" pages: an unknown dashboard URL, or a workload or project that does not exist (any more). */
import { html } from "htm/preact";
import type { ComponentChildren } from "preact";
import { useApi } from "../lib/hooks";
import { PageTitle } from "./ui";

/** A not-found page with a way back. */
export function NotFound({ what, back }: { what: ComponentChildren; back: { href: string; label: string } }) {
  return html`<${PageTitle}>Not found<//>
    <section class="card not-found" data-testid="not-found">
      <p>${what}</p>
      <div class="actions"><a class="button primary" href=${back.href}>${back.label}</a><a class="button" href="/">Overview</a></div>
    </section>`;
}

/**
 * Shows `children` unless the admin API says `path` does not exist (404), then a not-found page
 * with a way back; pages that only show an error note for a missing thing get one this way.
 */
export function Exists({
  path,
  what,
  back,
  children,
}: {
  path: string;
  what: ComponentChildren;
  back: { href: string; label: string };
  children: ComponentChildren;
}) {
  const probe = useApi<unknown>(path);
  if (probe.error?.status === 404) return html`<${NotFound} what=${what} back=${back} />`;
  return children;
}
