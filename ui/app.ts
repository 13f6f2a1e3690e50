/** The app shell: sign-in gate, navigation, and which page each path shows. */
import { html } from "htm/preact";
import { useEffect, useState } from "preact/hooks";
import {
  adoptServerSignIn,
  ApiError,
  markSignedIn,
  setForbiddenRoleHandler,
  setUnauthorizedHandler,
  signedIn,
  signOut,
} from "./lib/api";
import { match, navigate, useLocation } from "./lib/router";
import { can, forgetMe, loadMe, useMe, type Action } from "./lib/me";
import type { Me } from "./lib/types";
import { returnTo, SignIn, takeSsoReturn } from "./pages/signin";
import { UsersPage } from "./pages/users";
import { MySessions } from "./pages/users-me";
import { Overview } from "./pages/overview";
import { Setup } from "./pages/setup";
import { Projects } from "./pages/projects";
import { ProjectPage } from "./pages/project";
import { KeysPage } from "./pages/keys";
import { BatchesPage, BatchPage } from "./pages/batches";
import { WorkloadNew, WorkloadEdit } from "./pages/workload-form";
import { WorkloadPage } from "./pages/workload";
import { Playground } from "./pages/playground";
import { LogsPage } from "./pages/logs";
import { WebhooksPage } from "./pages/webhooks";
import { ProjectRequestsPage, RequestsPage } from "./pages/requests";
import { RequestPage } from "./pages/request";
import { Workers } from "./pages/workers";
import { Telemetry } from "./pages/telemetry";
import { ModelsPage } from "./pages/models";
import { AuditPageView } from "./pages/audit";
import { UsagePage } from "./pages/usage";
import { SettingsPage } from "./pages/settings";
import { Exists, NotFound } from "./components/not-found";
import { ErrorNote, Loading } from "./components/ui";
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
  ["/projects/:project/batches", (p) => inProject(p.project, html`<${BatchesPage} project=${p.project} />`)],
  [
    "/projects/:project/batches/:batch",
    (p) => inProject(p.project, html`<${BatchPage} project=${p.project} id=${p.batch} />`),
  ],
  ["/projects/:project/requests", (p) => inProject(p.project, html`<${ProjectRequestsPage} project=${p.project} />`)],
  ["/requests/:request", (p) => html`<${RequestPage} requestId=${p.request} />`],
  ["/projects/:project/workloads/new", (p) => inProject(p.project, html`<${WorkloadNew} project=${p.project} />`)],
  ["/workloads/:id", (p) => ofWorkload(p.id, html`<${WorkloadPage} id=${p.id} />`)],
  ["/workloads/:id/edit", (p) => ofWorkload(p.id, html`<${WorkloadEdit} id=${p.id} />`)],
  ["/workloads/:id/playground", (p) => ofWorkload(p.id, html`<${Playground} id=${p.id} />`)],
  ["/workloads/:id/logs", (p) => ofWorkload(p.id, html`<${LogsPage} id=${p.id} />`)],
  ["/workloads/:id/webhooks", (p) => ofWorkload(p.id, html`<${WebhooksPage} id=${p.id} />`)],
  ["/workloads/:id/requests", (p) => ofWorkload(p.id, html`<${RequestsPage} id=${p.id} />`)],
  [
    "/workloads/:id/requests/:request",
    (p) => ofWorkload(p.id, html`<${RequestPage} id=${p.id} requestId=${p.request} />`),
  ],
  ["/models", () => html`<${ModelsPage} />`],
  ["/workers", () => html`<${Workers} />`],
  ["/telemetry", () => html`<${Telemetry} />`],
  ["/usage", () => html`<${UsagePage} />`],
  ["/audit", () => html`<${AuditPageView} />`],
  ["/settings", () => html`<${SettingsPage} />`],
  ["/users", () => html`<${UsersPage} />`],
  ["/sessions", () => html`<${MySessions} />`],
];

/** The navigation's links; `needs`: shown only to a role that may do it. */
const NAV: { href: string; label: string; needs?: Action }[] = [
  { href: "/", label: "Overview" },
  { href: "/projects", label: "Projects" },
  { href: "/models", label: "Models" },
  { href: "/workers", label: "Workers" },
  { href: "/telemetry", label: "Telemetry" },
  { href: "/usage", label: "Usage" },
  { href: "/audit", label: "Audit log" },
  { href: "/settings", label: "Settings", needs: "settings.read" },
  { href: "/users", label: "Users", needs: "users" },
  { href: "/setup", label: "Get started", needs: "project.create" },
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

/** Who is signed in, in the top bar: the user's email and role, or the admin token. */
function WhoAmI({ me }: { me: Me }) {
  const who = me.user ? me.user.email : "admin token";
  return html`<p class="whoami" data-testid="whoami"><span class="offscreen">Signed in as </span><span class="whoami-name" title=${me.user?.name || who}>${who}</span>${me.user ? html` <span class=${`badge role-${me.role}`}>${me.role}</span>` : null}</p>`;
}

/** The navigation: a sidebar on wide screens, a menu button on phones. */
function Shell({
  path,
  me,
  children,
  onSignOut,
}: {
  path: string;
  me: Me;
  children: unknown;
  onSignOut(everywhere: boolean): void;
}) {
  const [open, setOpen] = useState(false);
  useEffect(() => setOpen(false), [path]);
  useFocusHeading(path);
  useOverflowHints();
  return html`<a class="skip" href="#main">Skip to content</a>
    <div class="shell">
      <header class="topbar">
        <a class="brand" href="/"><span class="logo" aria-hidden="true"></span>inferd</a>
        <${WhoAmI} me=${me} />
        <button type="button" class="menu-toggle" aria-expanded=${open} aria-controls="nav" onClick=${() => setOpen(!open)}>Menu</button>
      </header>
      <nav id="nav" class=${`sidebar ${open ? "open" : ""}`} aria-label="Main">
        <ul>
          ${NAV.filter((n) => !n.needs || can(n.needs)).map((n) => html`<li><a href=${n.href} aria-current=${isCurrent(n.href, path) ? "page" : undefined}>${n.label}</a></li>`)}
        </ul>
        <div class="account">
          ${me.user ? html`<a href="/sessions" aria-current=${path === "/sessions" ? "page" : undefined}>My sessions</a>` : null}
          <button type="button" class="signout" onClick=${() => onSignOut(false)}>Sign out</button>
          ${can("signout.everywhere") ? html`<button type="button" class="signout" title="Ends every dashboard session, on every browser" onClick=${() => onSignOut(true)}>Sign out everywhere</button>` : null}
        </div>
      </nav>
      <main id="main" tabindex="-1">${children}</main>
    </div>`;
}

/** Where the dashboard is with sign-in: signed out, asking the server who we are, or signed in. */
type Gate = "out" | "checking" | "in";

/** The whole dashboard: sign-in until the server says who is signed in (`/admin/me`, asked once), then the pages. */
export function App() {
  const { path } = useLocation();
  const me = useMe();
  const [gate, setGate] = useState<Gate>(() => {
    adoptServerSignIn();
    // Back from single sign-on: the cookie is set but this browser has not marked itself signed in.
    return takeSsoReturn() || signedIn() ? "checking" : "out";
  });
  const [failed, setFailed] = useState<ApiError>();
  useEffect(() => {
    setUnauthorizedHandler(() => {
      forgetMe();
      setGate("out");
    });
    setForbiddenRoleHandler(() => void loadMe().catch(() => undefined));
  }, []);
  useEffect(() => {
    if (gate !== "checking") return;
    setFailed(undefined);
    loadMe().then(
      () => {
        markSignedIn();
        setGate("in");
      },
      (e: ApiError) => e.status !== 401 && setFailed(e),
    );
  }, [gate]);
  useEffect(() => {
    if (gate === "in" && path === "/signin") navigate(returnTo(), { replace: true });
  }, [gate, path]);
  if (gate === "out") return html`<${SignIn} onSignedIn=${() => setGate("checking")} />`;
  if (!me || gate !== "in")
    return html`<main class="signin" id="main">${failed ? html`<div class="card"><${ErrorNote} error=${failed} /><button type="button" onClick=${() => setGate("out")}>Back to sign-in</button></div>` : html`<${Loading} />`}</main>`;
  const out = async (everywhere: boolean) => {
    await signOut(everywhere);
    forgetMe();
    setGate("out");
    navigate("/", { replace: true });
  };
  return html`<${Shell} path=${path} me=${me} onSignOut=${out}>${routePage(path)}<//>`;
}
