/**
 * Serves the dashboard: `index.html` (no-cache, ETag) for `/` and every client-side route, the
 * content-hashed files under `/assets/` (cached for a year, immutable), JSON 404 for an unknown
 * asset, a strict Content-Security-Policy on all of them, gzip when the browser takes it. In a
 * compiled binary the files are embedded (src/ui/embedded.ts is replaced at build time); from
 * source, ui/ is bundled in memory on the first request and kept for the life of the process.
 */
import { Elysia } from "elysia";
import { join } from "node:path";
import { AppError } from "../errors";
import { ASSET_PREFIX, buildUi, type UiFile } from "./bundle";
import { embeddedUi } from "./embedded";

/**
 * The dashboard's Content-Security-Policy: scripts, connections, fonts and images from this origin
 * only; no inline or eval'd script. Inline *styles* are allowed because xterm.js writes its theme
 * and cell-size rules into <style> elements at run time (style cannot run script).
 */
export const CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data: blob:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join("; ");

/** Path prefixes of the APIs: a browser that asks for an unknown one gets JSON, never the dashboard page. */
export const API_PREFIXES = [
  "/api",
  "/admin",
  "/endpoint",
  "/agent",
  "/metrics",
  "/docs",
  "/healthz",
  "/login",
  "/assets",
];

/**
 * Whether a request is a browser asking for a page the dashboard answers (its own not-found page
 * for an unknown one): a GET of HTML outside the APIs.
 */
export function wantsDashboardPage(request: Request, path: string): boolean {
  if (request.method !== "GET" && request.method !== "HEAD") return false;
  if (!(request.headers.get("accept") ?? "").includes("text/html")) return false;
  return !API_PREFIXES.some((p) => path === p || path.startsWith(`${p}/`));
}

/** Top-level paths the dashboard routes on the client; each (and everything under it) gets index.html. */
export const CLIENT_SECTIONS = ["signin", "setup", "projects", "workloads", "models", "workers", "telemetry"] as const;

const SECURITY_HEADERS = {
  "content-security-policy": CSP,
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "x-frame-options": "DENY",
  "cross-origin-opener-policy": "same-origin",
};

const COMPRESSIBLE = /^(text\/|application\/(javascript|json)|image\/svg)/;

/** A file ready to serve, with its ETag and (made on first use) gzip copy. */
interface Served {
  bytes: Uint8Array<ArrayBuffer>;
  type: string;
  etag: string;
  gz?: Uint8Array<ArrayBuffer>;
}

/** Where the files come from: embedded in the binary, given by a test, or built from `root`/ui. */
export interface UiSource {
  root?: string;
  files?: () => Promise<UiFile[]>;
}

/** The embedded files of a compiled binary, read once. */
async function embeddedFiles(): Promise<UiFile[] | undefined> {
  const entries = Object.entries(embeddedUi.files ?? {});
  if (!entries.length) return undefined;
  return Promise.all(
    entries.map(async ([url, f]) => ({
      url,
      type: f.type,
      bytes: new Uint8Array(await Bun.file(f.path).arrayBuffer()),
    })),
  );
}

/** Loads the dashboard files once (a failed source build is retried on the next request). */
function fileLoader(source: UiSource): () => Promise<Map<string, Served>> {
  let loading: Promise<Map<string, Served>> | undefined;
  const load = async () => {
    const files =
      (await source.files?.()) ??
      (await embeddedFiles()) ??
      (await buildUi(source.root ?? join(import.meta.dir, "../..")));
    const map = new Map<string, Served>();
    for (const f of files)
      map.set(f.url, { bytes: f.bytes, type: f.type, etag: `"${Bun.hash(f.bytes).toString(36)}"` });
    return map;
  };
  return () => {
    loading ??= load().catch((e) => {
      loading = undefined;
      throw new AppError(500, "dashboard_unavailable", `the dashboard could not be built: ${(e as Error).message}`);
    });
    return loading;
  };
}

/** A response for one file: 304 on a matching ETag, gzip when accepted and worth it. */
function respond(request: Request, file: Served, cache: string): Response {
  const headers: Record<string, string> = {
    ...SECURITY_HEADERS,
    "content-type": file.type,
    "cache-control": cache,
    etag: file.etag,
    vary: "Accept-Encoding",
  };
  if (request.headers.get("if-none-match") === file.etag) return new Response(null, { status: 304, headers });
  let body = file.bytes;
  if (
    COMPRESSIBLE.test(file.type) &&
    file.bytes.length > 1024 &&
    /\bgzip\b/.test(request.headers.get("accept-encoding") ?? "")
  ) {
    file.gz ??= Bun.gzipSync(file.bytes);
    body = file.gz;
    headers["content-encoding"] = "gzip";
  }
  return new Response(request.method === "HEAD" ? null : body, { headers });
}

/**
 * The dashboard's routes, to `.use()` in the app. `source` is for tests (a fixed file list or
 * another checkout); the server passes nothing.
 * @example createApp(deps).use(uiRoutes())
 */
export function uiRoutes(source: UiSource = {}) {
  const files = fileLoader(source);
  const index = async ({ request }: { request: Request }) => {
    const file = (await files()).get("/index.html")!;
    return respond(request, file, "no-cache");
  };
  const app = new Elysia({ name: "inferd-ui", detail: { hide: true } })
    .get("/", index)
    .get(`${ASSET_PREFIX}*`, async ({ request }) => {
      const path = new URL(request.url).pathname;
      const file = (await files()).get(path);
      if (!file)
        return Response.json(
          { error: { code: "not_found", message: `dashboard file "${path}" not found` } },
          { status: 404, headers: { "cache-control": "no-store" } },
        );
      return respond(request, file, "public, max-age=31536000, immutable");
    });
  // Elysia's route methods register on the instance itself, so the loop needs no reassignment.
  for (const section of CLIENT_SECTIONS) app.get(`/${section}`, index).get(`/${section}/*`, index);
  // Any other page a browser asks for: the dashboard, which shows its own "not found" page.
  app.get("/*", async ({ request }) => {
    const path = new URL(request.url).pathname;
    if (!wantsDashboardPage(request, path))
      throw new AppError(404, "not_found", `no route for ${request.method} ${path}`);
    return index({ request });
  });
  return app;
}
