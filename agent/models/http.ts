/**
 * One HTTP request with redirects followed by hand (`redirect: "manual"`), so credentials go only
 * where they belong: `credentials` headers are sent to one origin (the hub) and dropped on any hop
 * to another host (the CDN a hub file redirects to), as browsers and curl drop `Authorization`.
 */

/** What `fetchFollowing` needs; `fetch` is injectable for tests. */
export interface FollowOptions {
  fetch?: typeof fetch;
  method?: string;
  /** Sent on every hop (e.g. `Range`). */
  headers?: Record<string, string>;
  /** Sent only while the request goes to `origin` (e.g. `Authorization` for the hub). */
  credentials?: { origin: string; headers: Record<string, string> };
  signal?: AbortSignal;
  /** Redirects followed before giving up (default 10). */
  maxRedirects?: number;
}

/** The final response and the URL that answered it. */
export interface Followed {
  res: Response;
  url: string;
}

const REDIRECTS = new Set([301, 302, 303, 307, 308]);

/**
 * Sends a request, following redirects by hand. Throws on too many redirects or a redirect
 * without a `Location`; every other answer (including errors) is returned.
 * @example const { res } = await fetchFollowing(url, { credentials: { origin: hub, headers: { authorization: `Bearer ${t}` } } });
 */
export async function fetchFollowing(url: string, opts: FollowOptions = {}): Promise<Followed> {
  const doFetch = opts.fetch ?? fetch;
  let current = url;
  let method = opts.method ?? "GET";
  for (let hop = 0; ; hop++) {
    const headers: Record<string, string> = { ...opts.headers };
    if (opts.credentials && new URL(current).origin === opts.credentials.origin)
      Object.assign(headers, opts.credentials.headers);
    const res = await doFetch(current, { method, headers, redirect: "manual", signal: opts.signal });
    if (!REDIRECTS.has(res.status)) return { res, url: current };
    const location = res.headers.get("location");
    await res.body?.cancel().catch(() => {});
    if (!location) throw new Error(`${method} ${current} answered ${res.status} without a Location`);
    if (hop >= (opts.maxRedirects ?? 10))
      throw new Error(`${method} ${url}: more than ${opts.maxRedirects ?? 10} redirects`);
    current = new URL(location, current).toString();
    if (res.status === 303) method = "GET";
  }
}

/**
 * The total size in a `Content-Range` header (`bytes 0-0/1234` → 1234; null when unknown or absent).
 * @example totalFromContentRange("bytes 100-199/1000") // → 1000
 */
export function totalFromContentRange(value: string | null): number | null {
  const m = /^bytes (?:\d+-\d+|\*)\/(\d+)$/.exec(value?.trim() ?? "");
  return m ? Number(m[1]) : null;
}

/**
 * The first byte of a `206` answer's `Content-Range` (`bytes 100-199/1000` → 100; null if absent).
 * @example startFromContentRange("bytes 100-199/1000") // → 100
 */
export function startFromContentRange(value: string | null): number | null {
  const m = /^bytes (\d+)-\d+\/(?:\d+|\*)$/.exec(value?.trim() ?? "");
  return m ? Number(m[1]) : null;
}
