import { createHash, generateKeyPairSync, randomBytes, sign, X509Certificate } from "node:crypto";
import { isIP } from "node:net";

/**
 * A self-signed certificate made without openssl (the single binary must make one on a bare
 * machine): a P-256 key and an X.509 v3 certificate for server authentication, DER-encoded here.
 */

const len = (n: number): number[] => {
  if (n < 0x80) return [n];
  const bytes: number[] = [];
  for (let v = n; v > 0; v >>= 8) bytes.unshift(v & 0xff);
  return [0x80 | bytes.length, ...bytes];
};
const tlv = (tag: number, content: Uint8Array | number[]): Uint8Array => {
  const c = content instanceof Uint8Array ? content : Uint8Array.from(content);
  return Uint8Array.from([tag, ...len(c.length), ...c]);
};
const cat = (...parts: Uint8Array[]): Uint8Array => Buffer.concat(parts);
const seq = (...parts: Uint8Array[]) => tlv(0x30, cat(...parts));
const oid = (dotted: string): Uint8Array => {
  const [a, b, ...rest] = dotted.split(".").map(Number);
  const out = [40 * a + b];
  for (const n of rest) {
    const enc = [n & 0x7f];
    for (let v = n >> 7; v > 0; v >>= 7) enc.unshift(0x80 | (v & 0x7f));
    out.push(...enc);
  }
  return tlv(0x06, out);
};
const utf8 = (s: string) => tlv(0x0c, Buffer.from(s, "utf8"));
const time = (d: Date): Uint8Array => {
  const iso = d.toISOString().replace(/[-:T]/g, "").slice(0, 14) + "Z";
  return d.getUTCFullYear() < 2050 ? tlv(0x17, Buffer.from(iso.slice(2))) : tlv(0x18, Buffer.from(iso));
};
const ext = (id: string, critical: boolean, value: Uint8Array) =>
  seq(oid(id), ...(critical ? [tlv(0x01, [0xff])] : []), tlv(0x04, value));

/** Names and addresses a certificate is for. */
function altNames(names: string[]): Uint8Array {
  const entries = names.map((n) => {
    const v = isIP(n);
    if (v === 4) return tlv(0x87, n.split(".").map(Number));
    if (v === 6) {
      const full = n.includes("::") ? expand6(n) : n;
      return tlv(
        0x87,
        full.split(":").flatMap((h) => [parseInt(h, 16) >> 8, parseInt(h, 16) & 0xff]),
      );
    }
    return tlv(0x82, Buffer.from(n, "ascii"));
  });
  return seq(...entries);
}

function expand6(a: string): string {
  const [head, tail] = a.split("::");
  const h = head ? head.split(":") : [];
  const t = tail ? tail.split(":") : [];
  return [...h, ...Array(8 - h.length - t.length).fill("0"), ...t].join(":");
}

const pem = (label: string, der: Uint8Array) =>
  `-----BEGIN ${label}-----\n${Buffer.from(der)
    .toString("base64")
    .match(/.{1,64}/g)!
    .join("\n")}\n-----END ${label}-----\n`;

/** A generated certificate: PEM texts and the SHA-256 fingerprint of its DER (what join tokens pin). */
export interface GeneratedCert {
  certPem: string;
  keyPem: string;
  fingerprint: string;
}

/**
 * Makes a self-signed server certificate for the given DNS names and IP addresses, valid `days`.
 * @example selfSignedCert(["inferd.host", "localhost", "127.0.0.1"]).fingerprint // → 64 hex chars
 */
export function selfSignedCert(names: string[], days = 3650, commonName = "inferd"): GeneratedCert {
  const { publicKey, privateKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
  const serial = randomBytes(16);
  // A positive INTEGER in minimal DER: top bit clear (not negative) and first byte non-zero (no padding).
  serial[0] = (serial[0] & 0x7f) | 0x40;
  const algo = seq(oid("1.2.840.10045.4.3.2"));
  const name = seq(tlv(0x31, seq(oid("2.5.4.3"), utf8(commonName))));
  const now = Date.now();
  const tbs = seq(
    tlv(0xa0, tlv(0x02, [2])),
    tlv(0x02, serial),
    algo,
    name,
    seq(time(new Date(now - 3600_000)), time(new Date(now + days * 86_400_000))),
    name,
    new Uint8Array(publicKey.export({ type: "spki", format: "der" })),
    tlv(
      0xa3,
      seq(
        ext("2.5.29.19", true, seq()),
        ext("2.5.29.15", true, tlv(0x03, [0x07, 0x80])),
        ext("2.5.29.37", false, seq(oid("1.3.6.1.5.5.7.3.1"))),
        ext("2.5.29.17", false, altNames(names)),
      ),
    ),
  );
  const signature = sign("sha256", tbs, privateKey);
  const der = seq(tbs, algo, tlv(0x03, cat(Uint8Array.from([0]), signature)));
  const certPem = pem("CERTIFICATE", der);
  new X509Certificate(certPem); // parses: a malformed certificate fails here, not in a client
  return {
    certPem,
    keyPem: privateKey.export({ type: "pkcs8", format: "pem" }) as string,
    fingerprint: createHash("sha256").update(der).digest("hex"),
  };
}

/** The SHA-256 fingerprint (lower-case hex) of a PEM certificate's DER. */
export function fingerprintOf(certPem: string): string {
  return new X509Certificate(certPem).fingerprint256.replace(/:/g, "").toLowerCase();
}
