import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import { X509Certificate } from "node:crypto";
import { fingerprintOf, selfSignedCert } from "./selfsigned";

/** The name every generated host certificate carries; agents verify the pinned certificate against it. */
export const HOST_CERT_NAME = "inferd.host";

/** The host's TLS identity: certificate, key, fingerprint (pinned by join tokens) and a name to verify. */
export interface HostCert {
  certPem: string;
  keyPem: string;
  fingerprint: string;
  serverName: string;
}

/** The first DNS name of a certificate's subjectAltName, for agents to verify against. */
function firstDnsName(certPem: string): string {
  const alt = new X509Certificate(certPem).subjectAltName ?? "";
  return /DNS:([^,\s]+)/.exec(alt)?.[1] ?? HOST_CERT_NAME;
}

/**
 * The certificate the host serves HTTPS with: the user's (`--tls-cert`/`--tls-key`), else one made at
 * first start and kept in `<data-dir>/tls/` (mode 0600 key), so join tokens stay valid across restarts.
 */
export function loadHostCert(
  dataDir: string,
  certFile?: string,
  keyFile?: string,
  extraNames: string[] = [],
): HostCert {
  if (certFile || keyFile) {
    if (!certFile || !keyFile) throw new Error("--tls-cert and --tls-key go together");
    const certPem = readFileSync(certFile, "utf8");
    return {
      certPem,
      keyPem: readFileSync(keyFile, "utf8"),
      fingerprint: fingerprintOf(certPem),
      serverName: firstDnsName(certPem),
    };
  }
  const dir = join(dataDir, "tls");
  const cert = join(dir, "host-cert.pem");
  const key = join(dir, "host-key.pem");
  if (existsSync(cert) && existsSync(key)) {
    const certPem = readFileSync(cert, "utf8");
    return {
      certPem,
      keyPem: readFileSync(key, "utf8"),
      fingerprint: fingerprintOf(certPem),
      serverName: HOST_CERT_NAME,
    };
  }
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const names = [...new Set([HOST_CERT_NAME, hostname(), "localhost", "127.0.0.1", "::1", ...extraNames])];
  const made = selfSignedCert(names, 3650, `inferd host ${hostname()}`);
  writeFileSync(key, made.keyPem, { mode: 0o600 });
  writeFileSync(cert, made.certPem);
  return { certPem: made.certPem, keyPem: made.keyPem, fingerprint: made.fingerprint, serverName: HOST_CERT_NAME };
}
