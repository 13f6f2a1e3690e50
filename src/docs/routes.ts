/**
 * The API reference at `/docs`: Swagger UI from the pinned `swagger-ui-dist` package, served by us
 * (embedded in the compiled binary like any `type: "file"` import), over the OpenAPI document at
 * `/docs/json`. Nothing is fetched from the network when the page is viewed.
 */
import { Elysia } from "elysia";
import bundlePath from "swagger-ui-dist/swagger-ui-bundle.js" with { type: "file" };
import cssPath from "swagger-ui-dist/swagger-ui.css" with { type: "file" };
import { AppError } from "../errors";

/** The page's policy: everything from this origin; Swagger UI sets inline styles and data: images. */
const CSP =
  "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'";

const PAGE = `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8" />
  <meta name="viewport" content="width=device-width, initial-scale=1" />
  <title>inferd API reference</title>
  <link rel="stylesheet" href="/docs/assets/swagger-ui.css" />
  <link rel="stylesheet" href="/docs/assets/docs.css" />
</head>
<body>
  <header class="docs-top"><a href="/">← inferd dashboard</a></header>
  <main id="swagger-ui"></main>
  <script src="/docs/assets/swagger-ui-bundle.js"></script>
  <script src="/docs/assets/init.js"></script>
</body>
</html>
`;

/** Starts Swagger UI on the OpenAPI document (a file, not inline script, for the CSP). */
const INIT = `window.ui = SwaggerUIBundle({ url: "/docs/json", dom_id: "#swagger-ui", deepLinking: true, tryItOutEnabled: false });\n`;

/** The header link, and a dark look that follows the system setting. */
const DOCS_CSS = `body { margin: 0; }
.docs-top { padding: 0.6rem 1rem; font: 14px system-ui, sans-serif; border-bottom: 1px solid #ddd; }
.docs-top a { color: #1d4ed8; }
@media (prefers-color-scheme: dark) {
  body { background: #1b1b1f; }
  .docs-top { border-color: #333; }
  .docs-top a { color: #93b4ff; }
  .swagger-ui { filter: invert(90%) hue-rotate(180deg); }
  .swagger-ui .microlight { filter: invert(100%) hue-rotate(180deg); }
}
`;

/** The files under /docs/assets/: path or text, and content type. */
const ASSETS: Record<string, { file?: string; text?: string; type: string }> = {
  "swagger-ui-bundle.js": { file: bundlePath, type: "text/javascript; charset=utf-8" },
  "swagger-ui.css": { file: cssPath, type: "text/css; charset=utf-8" },
  "init.js": { text: INIT, type: "text/javascript; charset=utf-8" },
  "docs.css": { text: DOCS_CSS, type: "text/css; charset=utf-8" },
};

const HEADERS = {
  "content-security-policy": CSP,
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
};

/** Gzipped copies of the assets, made on first use (the bundle is 1.7 MB, about 0.5 MB gzipped). */
const gzipped = new Map<string, Uint8Array<ArrayBuffer>>();

/** An asset's bytes, gzipped when the browser takes it. */
async function assetBody(
  name: string,
  request: Request,
): Promise<{ body: Uint8Array<ArrayBuffer> | string; gzip: boolean }> {
  const asset = ASSETS[name];
  const raw = async () => (asset.file ? new Uint8Array(await Bun.file(asset.file).arrayBuffer()) : asset.text!);
  if (!/\bgzip\b/.test(request.headers.get("accept-encoding") ?? "")) return { body: await raw(), gzip: false };
  let gz = gzipped.get(name);
  if (!gz) gzipped.set(name, (gz = Bun.gzipSync(await raw())));
  return { body: gz, gzip: true };
}

/** `/docs` (the viewer page) and its assets; the OpenAPI plugin serves `/docs/json`. */
export const docsRoutes = () =>
  new Elysia({ name: "inferd-docs", detail: { hide: true } })
    .get(
      "/docs",
      () =>
        new Response(PAGE, {
          headers: { ...HEADERS, "content-type": "text/html; charset=utf-8", "cache-control": "no-cache" },
        }),
    )
    .get("/docs/assets/:name", async ({ params, request }) => {
      const asset = ASSETS[params.name];
      if (!asset) throw new AppError(404, "not_found", `no API docs file "${params.name}"`);
      const { body, gzip } = await assetBody(params.name, request);
      const headers: Record<string, string> = {
        ...HEADERS,
        "content-type": asset.type,
        "cache-control": "public, max-age=3600",
        vary: "Accept-Encoding",
      };
      if (gzip) headers["content-encoding"] = "gzip";
      return new Response(body, { headers });
    });
