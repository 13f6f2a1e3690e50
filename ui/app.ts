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
import { RequestsPage } from "./pages/requests";
import { RequestPage } from "./pages/request";
import { Workers } from "./pages/workers";
import { Telemetry } from "./pages/telemetry";
import { ModelsPage } from "./pages/models";
import { AuditPageView } from "./pages/audit";
import { UsagePage } from "./pages/usage";
import { SettingsPage } from "./pages/settings";
import { Exists, NotFound } from "./components/not-found";
import { useFocusHeading, useOverflowHints } from "./lib/a11y";

type Page = (params: Record<string, string>) => unknown;

const TO_PROJECTS = { href: "/projects", label: "All projects" };

/** A project's page, or a not-found page with a way back when there is no such project. */
const inProject = (project: string, page: unknown) =>
  html`<${Exists} key=${project} path=${`/admin/projects/${encodeURIComponent(project)}`} what=${html`There is no project <code>${project}</code> (it may have been deleted).`} back=${TO_PROJECTS}>${page}<//>`;

/** A workload's page, or a not-found page with a way back when there is no such workload. */
const ofWorkload = (id: string, page: unknown) =>
  html`<${Exists} key=${id} path=${`/admin/workloads/${encodeURIComponent(id)}`} what=${html`There is no workload <code>${id}</code> (it may have been deleted).`} back=${TO_PROJECTS}>${page}<//>`;

const ROUTES: [string, Page][] = [
  ["/", () => html`<${Overview} />`],
  ["/setup", () => html`<${Setup} />`],
  ["/projects", () => html`<${Projects} />`],
  ["/projects/:project", (p) => inProject(p.project, html`<${ProjectPage} project=${p.project} />`)],
  ["/projects/:project/keys", (p) => inProject(p.project, html`<${KeysPage} project=${p.project} />`)],
  ["/projects/:project/workloads/new", (p) => inProject(p.project, html`<${WorkloadNew} project=${p.project} />`)],
  ["/workloads/:id", (p) => ofWorkload(p.id, html`<${WorkloadPage} id=${p.id} />`)],
  ["/workloads/:id/edit", (p) => ofWorkload(p.id, html`<${WorkloadEdit} id=${p.id} />`)],
  ["/workloads/:id/playground", (p) => ofWorkload(p.id, html`<${Playground} id=${p.id} />`)],
  ["/workloads/:id/logs", (p) => ofWorkload(p.id, html`<${LogsPage} id=${p.id} />`)],
  ["/workloads/:id/webhooks", (p) => ofWorkload(p.id, html`<${WebhooksPage} id=${p.id} />`)],
  ["/workloads/:id/requests", (p) => ofWorkload(p.id, html`<${RequestsPage} id=${p.id} />`)],
  ["/workloads/:id/requests/:request", (p) => ofWorkload(p.id, html`<${RequestPage} id=${p.id} requestId=${p.request} />`)],
  ["/models", () => html`<${ModelsPage} />`],
  ["/workers", () => html`<${Workers} />`],
  ["/telemetry", () => html`<${Telemetry} />`],
  ["/usage", () => html`<${UsagePage} />`],
  ["/audit", () => html`<${AuditPageView} />`],
  ["/settings", () => html`<${SettingsPage} />`],
];

const NAV = [
  { href: "/", label: "Overview" },
  { href: "/projects", label: "Projects" },
  { href: "/models", label: "Models" },
  { href: "/workers", label: "Workers" },
  { href: "/telemetry", label: "Telemetry" },
  { href: "/usage", label: "Usage" },
  { href: "/audit", label: "Audit log" },
  { href: "/settings", label: "Settings" },
  { href: "/setup", label: "Get started" },
  { href: "/docs", label: "API docs" },
];

/** The page for a path, or a not-found note. */
function routePage(path: string) {
  for (const [pattern, page] of ROUTES) {
    const params = match(pattern, path === "" ? "/" : path);
    if (params) return page(params);
  }
  return html`<${NotFound} what=${html`Nothing lives at <code>${path}</code> in the dashboard.`} back=${{ href: "/", label: "Back to the overview" }} />`;
}

/** Whether a nav link is the current section (a workload's pages belong to Projects). */
function isCurrent(href: string, path: string): boolean {
  if (href === "/") return path === "/";
  if (href === "/projects" && path.startsWith("/workloads/")) return true;
  return path === href || path.startsWith(`${href}/`);
}

/** The navigation: a sidebar on wide screens, a menu button on phones. */
function Shell({ path, children, onSignOut }: { path: string; children: unknown; onSignOut(everywhere: boolean): void }) {
  const [open, setOpen] = useState(false);
  useEffect(() => setOpen(false), [path]);
  useFocusHeading(path);
  useOverflowHints();
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
