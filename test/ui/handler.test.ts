import { describe, expect, test } from "bun:test";
import { uiRoutes, CSP } from "../../src/ui/routes";
import { buildUi, uiModules, type UiFile } from "../../src/ui/bundle";
import { repoRoot } from "../helpers/proc";
import { ENGINES, engineFaces } from "../../agent/engines";

/**
 * The dashboard's host-side handler: index.html for every client route (no-cache, CSP), hashed
 * assets cached for a year, JSON 404 for unknown assets, ETag revalidation, gzip; and the real
 * in-memory build of ui/ that the handler serves from source.
 */
const enc = (s: string) => new TextEncoder().encode(s) as Uint8Array<ArrayBuffer>;
const FILES: UiFile[] = [
  {
    url: "/index.html",
    type: "text/html;charset=utf-8",
    bytes: enc(`<!doctype html><script type="module" src="/assets/index-abc123.js"></script>`),
  },
  {
    url: "/assets/index-abc123.js",
    type: "text/javascript;charset=utf-8",
    bytes: enc(`console.log(${JSON.stringify("x".repeat(4000))});`),
  },
];
const app = uiRoutes({ files: async () => FILES });
const get = (path: string, headers: Record<string, string> = {}) =>
  app.handle(new Request(`http://inferd.test${path}`, { headers }));

describe("serving the dashboard", () => {
  test.each([
    "/",
    "/signin",
    "/projects",
    "/projects/demo/keys",
    "/workloads/wl_1/logs",
    "/workers",
    "/telemetry",
    "/setup",
    "/models",
  ])("%s answers index.html, not cached, with the CSP", async (path) => {
    const r = await get(path);
    expect(r.status).toBe(200);
    expect(r.headers.get("content-type")).toContain("text/html");
    expect(r.headers.get("cache-control")).toBe("no-cache");
    expect(r.headers.get("content-security-policy")).toBe(CSP);
    expect(r.headers.get("x-content-type-options")).toBe("nosniff");
    expect(await r.text()).toContain("/assets/index-abc123.js");
  });

  test("the CSP allows scripts only from this origin, never inline or eval'd", () => {
    const script = /script-src ([^;]+)/.exec(CSP)?.[1];
    expect(script).toBe("'self'");
    expect(CSP).toContain("default-src 'self'");
    expect(CSP).toContain("frame-ancestors 'none'");
    expect(CSP).not.toContain("unsafe-eval");
  });

  test("hashed assets are immutable for a year, gzip when accepted, 304 on a matching ETag", async () => {
    const r = await get("/assets/index-abc123.js", { "accept-encoding": "gzip, br" });
    expect(r.status).toBe(200);
    expect(r.headers.get("cache-control")).toBe("public, max-age=31536000, immutable");
    expect(r.headers.get("content-encoding")).toBe("gzip");
    expect(Bun.gunzipSync(new Uint8Array(await r.arrayBuffer()))).toEqual(FILES[1].bytes);
    const again = await get("/assets/index-abc123.js", { "if-none-match": r.headers.get("etag")! });
    expect(again.status).toBe(304);
  });

  test("an unknown asset is a JSON 404", async () => {
    const r = await get("/assets/nope-123.js");
    expect(r.status).toBe(404);
    expect(await r.json()).toEqual({
      error: { code: "not_found", message: expect.stringContaining("/assets/nope-123.js") },
    });
  });
});

describe("building ui/", () => {
  test("Bun's HTML bundler makes index.html with hashed files only, no inline script, all served", async () => {
    const files = await buildUi(repoRoot);
    const html = new TextDecoder().decode(files.find((f) => f.url === "/index.html")!.bytes);
    expect(html).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);
    const refs = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]);
    expect(refs.length).toBeGreaterThanOrEqual(3);
    for (const ref of refs) expect(ref).toMatch(/^\/assets\/[\w.-]+-[a-z0-9]{8}\.(js|css|svg)$/);
    const real = uiRoutes({ root: repoRoot });
    for (const ref of refs) {
      const r = await real.handle(new Request(`http://inferd.test${ref}`));
      expect(r.status).toBe(200);
    }
  });

  test("the workload form's backends come from the engines' descriptors, embedded at build time", async () => {
    const files = await buildUi(repoRoot);
    const js = files
      .filter((f) => f.url.endsWith(".js"))
      .map((f) => new TextDecoder().decode(f.bytes))
      .join("\n");
    const faces = engineFaces();
    expect(faces.map((f) => f.id)).toEqual(Object.keys(ENGINES));
    for (const f of faces) {
      expect(js).toContain(JSON.stringify(f.hint));
      if (f.command) expect(js).toContain(JSON.stringify(f.command));
    }
  });

  test("uiModules replaces the embedded stub with one file import per built file", async () => {
    const files = await buildUi(repoRoot);
    const modules = uiModules(repoRoot, files);
    const stub = Object.entries(modules).find(([p]) => p.endsWith("src/ui/embedded.ts"))![1] as string;
    expect(stub.match(/with \{ type: "file" \}/g)?.length).toBe(files.length);
    expect(stub).toContain(`"/index.html": { path:`);
    expect(Object.keys(modules).length).toBe(files.length + 1);
  });
});
