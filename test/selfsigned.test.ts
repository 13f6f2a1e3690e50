import { describe, expect, test } from "bun:test";
import { X509Certificate } from "node:crypto";
import { fingerprintOf, selfSignedCert } from "../src/tls/selfsigned";

describe("the host's self-signed certificate", () => {
  test("is valid X.509 every time (serial numbers in minimal DER), for the names and addresses given", () => {
    // Random serials once produced a non-minimal INTEGER about one start in 512: make many.
    for (let i = 0; i < 2000; i++) {
      const c = selfSignedCert(["inferd.host", "127.0.0.1", "::1"], 1);
      expect(fingerprintOf(c.certPem)).toBe(c.fingerprint);
    }
    const c = selfSignedCert(["inferd.host", "gpu-box", "127.0.0.1", "::1"]);
    const x = new X509Certificate(c.certPem);
    expect(x.subjectAltName).toContain("DNS:inferd.host");
    expect(x.subjectAltName).toContain("DNS:gpu-box");
    expect(x.subjectAltName).toContain("IP Address:127.0.0.1");
    expect(x.verify(x.publicKey)).toBe(true);
  });

  test("serves HTTPS that a client trusting exactly this certificate verifies", async () => {
    const c = selfSignedCert(["inferd.host"]);
    const srv = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      tls: { cert: c.certPem, key: c.keyPem },
      fetch: () => new Response("ok"),
    });
    try {
      const r = await fetch(`https://127.0.0.1:${srv.port}/`, {
        tls: { ca: c.certPem, serverName: "inferd.host" },
      } as RequestInit);
      expect(await r.text()).toBe("ok");
      const other = selfSignedCert(["inferd.host"]);
      await expect(
        fetch(`https://127.0.0.1:${srv.port}/`, {
          tls: { ca: other.certPem, serverName: "inferd.host" },
        } as RequestInit),
      ).rejects.toThrow();
    } finally {
      srv.stop(true);
    }
  });
});
