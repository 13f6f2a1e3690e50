/**
 * `fetch` for URLs someone else chose (a tenant's model URL): each request (so each redirect hop,
 * as `fetchFollowing` sends one per hop) is judged by the address rules first, then connects to
 * exactly the address that was checked, with TLS verified for the URL's host name, so a second DNS
 * answer cannot lead it to a loopback or private address.
 */
import { isIP } from "node:net";
import { checkServerIdentity, type PeerCertificate } from "node:tls";
import { bareHost, checkUrl, resolveAllowed, type AddressPolicy } from "./address";

/**
 * A fetch that refuses (throws `AddressRefused`) a URL the rules refuse and pins the connection to
 * the checked address. `base` is the fetch underneath (injectable for tests).
 * @example const get = guardedFetch({ allowPrivate: false, resolve: makeResolver() }); await get("https://10.0.0.1/x") // throws
 */
export function guardedFetch(policy: AddressPolicy, what = "the model URL", base: typeof fetch = fetch): typeof fetch {
  const guarded = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const raw = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
    const url = checkUrl(raw, { what, http: policy.allowPrivate, literal: { allowPrivate: policy.allowPrivate } });
    const target = await resolveAllowed(url, policy);
    const host = bareHost(url);
    if (isIP(host)) return base(url, init);
    const pinned = new URL(url);
    pinned.hostname = target.family === 6 ? `[${target.address}]` : target.address;
    const headers = new Headers(init?.headers);
    headers.set("host", url.host);
    const given = (init as { tls?: Record<string, unknown> } | undefined)?.tls;
    const tls = {
      ...given,
      serverName: host,
      checkServerIdentity: (_name: string, cert: PeerCertificate) => checkServerIdentity(host, cert),
    };
    return base(pinned, { ...init, headers, tls } as RequestInit);
  };
  return guarded as typeof fetch;
}
