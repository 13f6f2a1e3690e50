/**
 * Which network addresses a URL given by someone else may reach: global unicast only, unless the
 * operator allows private ones. One set of rules for webhook receivers (host) and for model URLs
 * a tenant's workload names (agent), including every redirect hop; plain errors, no HTTP shapes.
 */
import { promises as dns } from "node:dns";
import { isIP } from "node:net";
import ipaddr from "ipaddr.js";

/** A resolved address of a host. */
export interface Resolved {
  address: string;
  family: 4 | 6;
}

/** Resolves a host name to all its addresses. */
export type Resolve = (host: string) => Promise<Resolved[]>;

/** How hosts are resolved and which addresses are allowed. */
export interface AddressPolicy {
  /** Let LAN and loopback addresses through (`--allow-private-webhooks`, `--allow-private-model-urls`). */
  allowPrivate: boolean;
  resolve: Resolve;
}

/** An address or URL the rules refuse; the message says why in plain words. */
export class AddressRefused extends Error {
  override name = "AddressRefused";
}

/**
 * The system resolver (getaddrinfo, every address), or, with `servers`, those DNS servers asked
 * directly for A and AAAA records.
 */
export function makeResolver(servers: string[] = []): Resolve {
  if (servers.length === 0) {
    return async (host) =>
      (await dns.lookup(host, { all: true, verbatim: true })).map((a) => ({
        address: a.address,
        family: a.family as 4 | 6,
      }));
  }
  const r = new dns.Resolver({ timeout: 2000, tries: 2 });
  r.setServers(servers);
  const quiet = (p: Promise<string[]>) =>
    p.catch((e: NodeJS.ErrnoException) =>
      ["ENODATA", "ENOTFOUND", "ENOTIMP"].includes(e.code ?? "") ? [] : Promise.reject(e),
    );
  return async (host) => {
    const [v4, v6] = await Promise.all([quiet(r.resolve4(host)), quiet(r.resolve6(host))]);
    return [
      ...v4.map((address) => ({ address, family: 4 as const })),
      ...v6.map((address) => ({ address, family: 6 as const })),
    ];
  };
}

/**
 * Whether an address may be reached: only global unicast, unless private ones are allowed.
 * Loopback, private, link-local, CGNAT, unspecified, multicast, reserved ranges and IPv4-mapped
 * IPv6 forms of them are refused (classified by ipaddr.js).
 * @example isAllowedAddress("10.0.0.5", false) // → false
 */
export function isAllowedAddress(address: string, allowPrivate: boolean): boolean {
  let parsed: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    parsed = ipaddr.process(address);
  } catch {
    return false;
  }
  const allowed = (range: string) =>
    allowPrivate ? !["unspecified", "multicast", "broadcast"].includes(range) : range === "unicast";
  if (!allowed(parsed.range())) return false;
  // An IPv6 form that carries an IPv4 address (IPv4-compatible ::/96, NAT64, SIIT, 6to4, Teredo)
  // is judged by that address too, so ::7f00:1 is loopback however it is written.
  const embedded = parsed.kind() === "ipv6" ? embeddedIpv4(parsed as ipaddr.IPv6) : null;
  return embedded === null || allowed(embedded.range());
}

/** The IPv4 address an IPv6 address embeds, by its prefix, or null. */
function embeddedIpv4(v6: ipaddr.IPv6): ipaddr.IPv4 | null {
  const w = v6.parts;
  const v4 = (hi: number, lo: number) => new ipaddr.IPv4([hi >> 8, hi & 0xff, lo >> 8, lo & 0xff]);
  const zero = (from: number, to: number) => w.slice(from, to).every((x) => x === 0);
  if (zero(0, 6) && !(w[6] === 0 && w[7] <= 1)) return v4(w[6], w[7]); // ::a.b.c.d (not :: or ::1)
  if (w[0] === 0x64 && w[1] === 0xff9b && (zero(2, 6) || w[2] === 1)) return v4(w[6], w[7]); // NAT64 64:ff9b::/96, 64:ff9b:1::/48
  if (zero(0, 4) && w[4] === 0xffff && w[5] === 0) return v4(w[6], w[7]); // SIIT ::ffff:0:a.b.c.d
  if (w[0] === 0x2002) return v4(w[1], w[2]); // 6to4
  if (w[0] === 0x2001 && w[1] === 0) return v4(w[6] ^ 0xffff, w[7] ^ 0xffff); // Teredo client (obfuscated)
  return null;
}

/** A URL's host without IPv6 brackets. */
export const bareHost = (url: URL) => url.hostname.replace(/^\[|\]$/g, "");

/** How `checkUrl` judges a URL. */
export interface UrlRules {
  /** Names the URL in messages ("webhook URLs", "the model URL"). */
  what: string;
  /** Also accept `http://` (model URLs when the operator allows private addresses). */
  http?: boolean;
  /** Judge a literal address or `localhost` at once, with this `allowPrivate` (omit to leave it to the resolve step). */
  literal?: { allowPrivate: boolean };
}

/**
 * Checks the shape of someone else's URL: https only (unless `http`), a host, no credentials; with
 * `literal`, a literal address or `localhost` is judged at once (no lookup needed). Returns the
 * parsed URL; throws `AddressRefused`.
 * @example checkUrl("https://10.0.0.1/m.gguf", { what: "the model URL", literal: { allowPrivate: false } }) // throws: a private address
 */
export function checkUrl(raw: string, rules: UrlRules): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new AddressRefused(`"${raw}" is not a valid URL`);
  }
  if (url.protocol !== "https:" && !(rules.http && url.protocol === "http:"))
    throw new AddressRefused(`${rules.what} must use https://`);
  if (url.username || url.password) throw new AddressRefused(`${rules.what} must not carry credentials`);
  const host = bareHost(url);
  if (!host) throw new AddressRefused(`"${raw}" has no host`);
  if (rules.literal) {
    const literal = isIP(host) ? host : /(^|\.)localhost\.?$/i.test(host) ? "127.0.0.1" : null;
    if (literal && !isAllowedAddress(literal, rules.literal.allowPrivate))
      throw new AddressRefused(`${rules.what} points at ${host}, a loopback, private or otherwise non-public address`);
  }
  return url;
}

/**
 * Resolves the URL's host and checks every address; returns the one to connect to (the caller
 * connects to exactly this address, so a second lookup cannot lead elsewhere). Throws `AddressRefused`.
 */
export async function resolveAllowed(url: URL, policy: AddressPolicy): Promise<Resolved> {
  const host = bareHost(url);
  let addrs: Resolved[];
  if (isIP(host)) addrs = [{ address: host, family: isIP(host) as 4 | 6 }];
  else {
    try {
      addrs = await policy.resolve(host);
    } catch (e) {
      throw new AddressRefused(
        `the host "${host}" does not resolve (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`,
      );
    }
  }
  if (addrs.length === 0) throw new AddressRefused(`the host "${host}" does not resolve`);
  const bad = addrs.find((a) => !isAllowedAddress(a.address, policy.allowPrivate));
  if (bad)
    throw new AddressRefused(
      `the host "${host}" resolves to ${bad.address}, a loopback, private or otherwise non-public address`,
    );
  return addrs[0];
}
