/**
 * Where this server listens and the address other machines should use: the base of every client
 * snippet and worker join command the dashboard shows. Pure functions over the settings and the
 * machine's network interfaces (injected, so tests need no real network).
 */
import { hostname, networkInterfaces, type NetworkInterfaceInfo } from "node:os";

/** What `GET /admin/info` says under `listen`. */
export interface ListenInfo {
  /** The address the HTTP listener is bound to (`--host`). */
  host: string;
  port: number;
  /** The HTTPS port remote agents join on. */
  tls_port: number;
  /** Only this machine can connect (bound to a loopback address). */
  loopback_only: boolean;
  /** The host name or address other machines use (`--advertise-host`, else a LAN address), or null when there is none. */
  lan_host: string | null;
  /** `http://<lan_host>:<port>`: the base URL for clients on the network, or null when loopback-only and nothing is advertised. */
  url: string | null;
  /** How to restart serve so the network can reach it (only when loopback-only). */
  restart: { flag: string; env: string } | null;
}

/** The interfaces of this machine, as `os.networkInterfaces()` gives them. */
export type Interfaces = NodeJS.Dict<NetworkInterfaceInfo[]>;

/** The settings this depends on. */
export interface ListenSettings {
  host: string;
  port: number;
  tlsPort: number;
  advertiseHost?: string;
}

/**
 * Whether a listen address accepts loopback connections only.
 * @example isLoopback("127.0.0.1") // → true; isLoopback("0.0.0.0") // → false
 */
export function isLoopback(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, "").toLowerCase();
  return h === "localhost" || h === "::1" || /^127\.\d+\.\d+\.\d+$/.test(h) || h === "::ffff:127.0.0.1";
}

/** Whether a listen address is every interface (IPv4 or IPv6 wildcard). */
const isWildcard = (host: string) => host === "0.0.0.0" || host === "::" || host === "[::]" || host === "";

/** RFC 1918 private ranges, most likely a LAN first (172.16/12 is where container bridges live). */
const PRIVATE = [/^192\.168\./, /^10\./, /^172\.(1[6-9]|2\d|3[01])\./];

/** How likely an address is the one LAN peers reach: 0 best, 3 a public or unknown address. */
const rank = (address: string) => {
  const i = PRIVATE.findIndex((re) => re.test(address));
  return i < 0 ? PRIVATE.length : i;
};

/**
 * This machine's LAN IPv4 address: an external one, 192.168/16 before 10/8 before 172.16/12 before others.
 * @example lanIPv4({ eth0: [{ family: "IPv4", address: "192.168.1.20", internal: false, … }] }) // → "192.168.1.20"
 */
export function lanIPv4(interfaces: Interfaces): string | undefined {
  const all = Object.values(interfaces).flatMap((list) => list ?? []);
  const v4 = all.filter(
    (i) => (i.family === "IPv4" || (i.family as unknown) === 4) && !i.internal && !i.address.startsWith("169.254."),
  );
  return v4.map((i) => i.address).sort((a, b) => rank(a) - rank(b))[0];
}

/** Brackets an IPv6 literal for use in a URL. */
export const urlHost = (host: string) => (host.includes(":") && !host.startsWith("[") ? `[${host}]` : host);

/** The host other machines reach this one by, or null when there is none (loopback-only, nothing advertised). */
export function lanHost(s: ListenSettings, interfaces: Interfaces): string | null {
  if (s.advertiseHost) return s.advertiseHost;
  if (isLoopback(s.host)) return null;
  if (isWildcard(s.host)) return lanIPv4(interfaces) ?? hostname();
  return s.host;
}

/**
 * Where this server listens and how the network reaches it.
 * @example listenInfo({ host: "127.0.0.1", port: 8420, tlsPort: 8421 }, {}).restart // → { flag: "--host 0.0.0.0", env: "INFERD_HOST=0.0.0.0" }
 */
export function listenInfo(s: ListenSettings, interfaces: Interfaces = networkInterfaces()): ListenInfo {
  const loopback = isLoopback(s.host);
  const lan = lanHost(s, interfaces);
  return {
    host: s.host,
    port: s.port,
    tls_port: s.tlsPort,
    loopback_only: loopback,
    lan_host: lan,
    url: lan ? `http://${urlHost(lan)}:${s.port}` : null,
    restart: loopback ? { flag: "--host 0.0.0.0", env: "INFERD_HOST=0.0.0.0" } : null,
  };
}

/** The HTTPS URL agents join: the LAN host, else the loopback address (which only a local agent can use). */
export function joinUrlOf(info: ListenInfo): string {
  return `https://${urlHost(info.lan_host ?? info.host)}:${info.tls_port}`;
}
