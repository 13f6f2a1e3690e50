/**
 * Searching the Ollama library by name. Ollama has no JSON search API: ollama.com/search is an HTML
 * page, so this asks it (as htmx does, `HX-Request: true`, which answers only the result list) and
 * reads each result's name, description, sizes (`0.5b`, `7b`…) and pull count from the page's
 * `x-test-*` attributes. The page is not an API and may change: a page without results parses to
 * none, never to an error. `OLLAMA_LIBRARY_URL` points it elsewhere (tests use a local fake).
 */

/** Where the library's search page lives unless `OLLAMA_LIBRARY_URL` says otherwise. */
export const OLLAMA_LIBRARY = "https://ollama.com";

/** One model of the library as the search page lists it. */
export interface OllamaLibraryModel {
  name: string;
  description: string;
  /** Parameter sizes offered as tags (`0.5b`, `7b`, `8x7b`, `270m`). */
  sizes: string[];
  capabilities: string[];
  /** The pull count as the page writes it (`27.7K`). */
  pulls: string | null;
}

/** The library's base URL from the environment. */
export function ollamaLibraryUrl(env: Record<string, string | undefined>): string {
  return (env.OLLAMA_LIBRARY_URL || OLLAMA_LIBRARY).replace(/\/+$/, "");
}

const decode = (s: string) =>
  s
    .replace(/<[^>]*>/g, "")
    .replace(/&amp;/g, "&")
    .replace(/&lt;/g, "<")
    .replace(/&gt;/g, ">")
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&nbsp;/g, " ")
    .trim();

/** Every element's text carrying the attribute `attr` within `html`. */
function textsOf(html: string, attr: string): string[] {
  const re = new RegExp(`<[a-z0-9]+[^>]*\\s${attr}(?:[\\s=][^>]*)?>([\\s\\S]*?)</`, "gi");
  return [...html.matchAll(re)].map((m) => decode(m[1])).filter(Boolean);
}

/**
 * The models of a search page's HTML (each `<li x-test-model>` block).
 * @example parseLibrarySearch(html)[0] // → { name: "qwen2.5", sizes: ["0.5b", "1.5b", …], … }
 */
export function parseLibrarySearch(html: string): OllamaLibraryModel[] {
  const blocks = html.split(/<li\b[^>]*\sx-test-model\b/i).slice(1);
  return blocks.flatMap((b) => {
    const name = textsOf(b, "x-test-search-response-title")[0];
    if (!name || !/^[\w.-]+(?:\/[\w.-]+)?$/.test(name)) return [];
    const description = decode(/<p\b[^>]*>([\s\S]*?)<\/p>/i.exec(b)?.[1] ?? "");
    return [
      {
        name,
        description,
        sizes: textsOf(b, "x-test-size"),
        capabilities: textsOf(b, "x-test-capability"),
        pulls: textsOf(b, "x-test-pull-count")[0] ?? null,
      },
    ];
  });
}

/**
 * The parameter count a size tag stands for (`0.5b` → 5e8, `8x7b` → 5.6e10, `270m` → 2.7e8), or null.
 * @example paramsOfSize("1.5b") // → 1500000000
 */
export function paramsOfSize(size: string): number | null {
  const m = /^(?:(\d+)x)?(\d+(?:\.\d+)?)([mbt])$/i.exec(size.trim());
  if (!m) return null;
  const unit = { m: 1e6, b: 1e9, t: 1e12 }[m[3].toLowerCase() as "m" | "b" | "t"];
  return Math.round(Number(m[1] ?? 1) * Number(m[2]) * unit);
}

/** Bytes per parameter of Ollama's default tags (Q4_K_M, about 4.85 bits a weight). */
export const Q4_K_M_BYTES_PER_PARAM = 4.85 / 8;

/** Searches the library; throws on a network failure or a non-2xx answer. */
export async function searchOllamaLibrary(
  query: string,
  base: string,
  fetchFn: typeof fetch = fetch,
): Promise<OllamaLibraryModel[]> {
  const res = await fetchFn(`${base}/search?q=${encodeURIComponent(query)}`, {
    headers: { accept: "text/html", "hx-request": "true" },
    signal: AbortSignal.timeout(15_000),
  });
  if (!res.ok) throw new Error(`the Ollama library (${base}) answered ${res.status}`);
  return parseLibrarySearch(await res.text());
}
