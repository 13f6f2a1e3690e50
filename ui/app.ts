/** The app shell: sign-in gate, navigation, and which page each path shows. */
import { html } from "htm/preact";
import { useEffect, useState } from "preact/hooks";
import { adoptServerSignIn, setUnauthorizedHandler, signedIn, signOut } from "./lib/api";
import { match, navigate, useLocation } from "./lib/router";
import { SignIn } from "./pages/signin";
import { Overview } from "./pages/overview";
import { Setup } from "./pages/setup";
import { Projects } from "./pages/projects";
import { ProjectPage } from "./pages/project";
import { KeysPage } from "./pages/keys";
import { WorkloadNew, WorkloadEdit } from "./pages/workload-form";
import { WorkloadPage } from "./pages/workload";
import { Playground } from "./pages/playground";
import { LogsPage } from "./pages/logs";
import { WebhooksPage } from "./pages/webhooks";
import { Workers } from "./pages/workers";
import { Telemetry } from "./pages/telemetry";
import { ModelsPage } from "./pages/models";

type Page = (params: Record<string, string>) => unknown;

const ROUTES: [string, Page][] = [
  ["/", () => html`<${Overview} />`],
  ["/setup", () => html`<${Setup} />`],
  ["/projects", () => html`<${Projects} />`],
  ["/projects/:project", (p) => html`<${ProjectPage} project=${p.project} />`],
  ["/projects/:project/keys", (p) => html`<${KeysPage} project=${p.project} />`],
  ["/projects/:project/workloads/new", (p) => html`<${WorkloadNew} project=${p.project} />`],
  ["/workloads/:id", (p) => html`<${WorkloadPage} id=${p.id} />`],
  ["/workloads/:id/edit", (p) => html`<${WorkloadEdit} id=${p.id} />`],
  ["/workloads/:id/playground", (p) => html`<${Playground} id=${p.id} />`],
  ["/workloads/:id/logs", (p) => html`<${LogsPage} id=${p.id} />`],
  ["/workloads/:id/webhooks", (p) => html`<${WebhooksPage} id=${p.id} />`],
  ["/models", () => html`<${ModelsPage} />`],
  ["/workers", () => html`<${Workers} />`],
  ["/telemetry", () => html`<${Telemetry} />`],
];

const NAV = [
  { href: "/", label: "Overview" },
  { href: "/projects", label: "Projects" },
  { href: "/models", label: "Models" },
  { href: "/workers", label: "Workers" },
  { href: "/telemetry", label: "Telemetry" },
  { href: "/setup", label: "Get started" },
  { href: "/docs", label: "API docs" },
];

/** The page for a path, or a not-found note. */
function routePage(path: string) {
  for (const [pattern, page] of ROUTES) {
    const params = match(pattern, path === "" ? "/" : path);
    if (params) return page(params);
  }
  return html`<h1>Not found</h1><p>Nothing lives at <code>${path}</code>. <a href="/">Back to the overview</a>.</p>`;
}

/** Whether a nav link is the current section. */
const isCurrent = (href: string, path: string) => (href === "/" ? path === "/" : path === href || path.startsWith(`${href}/`));

/** The navigation: a sidebar on wide screens, a menu button on phones. */
function Shell({ path, children, onSignOut }: { path: string; children: unknown; onSignOut(everywhere: boolean): void }) {
  const [open, setOpen] = useState(false);
  useEffect(() => setOpen(false), [path]);
  return html`<a class="skip" href="#main">Skip to content</a>
    <div class="shell">
      <header class="topbar">
        <a class="brand" href="/"><span class="logo" aria-hidden="true"></span>inferd</a>
        <button type="button" class="menu-toggle" aria-expanded=${open} aria-controls="nav" onClick=${() => setOpen(!open)}>Menu</button>
      </header>
      <nav id="nav" class=${`sidebar ${open ? "open" : ""}`} aria-label="Main">
        <ul>
          ${NAV.map((n) => html`<li><a href=${n.href} aria-current=${isCurrent(n.href, path) ? "page" : undefined}>${n.label}</a></li>`)}
        </ul>
        <button type="button" class="signout" onClick=${() => onSignOut(false)}>Sign out</button>
        <button type="button" class="signout" title="Ends every dashboard session, on every browser" onClick=${() => onSignOut(true)}>Sign out everywhere</button>
      </nav>
      <main id="main" tabindex="-1">${children}</main>
    </div>`;
}

/** The whole dashboard. */
export function App() {
  const { path } = useLocation();
  const [authed, setAuthed] = useState(() => {
    adoptServerSignIn();
    return signedIn();
  });
  useEffect(() => setUnauthorizedHandler(() => setAuthed(false)), []);
  if (!authed) return html`<${SignIn} onSignedIn=${() => setAuthed(true)} />`;
  const out = async (everywhere: boolean) => {
    await signOut(everywhere);
    setAuthed(false);
    navigate("/", { replace: true });
  };
  return html`<${Shell} path=${path} onSignOut=${out}>${routePage(path)}<//>`;
}
