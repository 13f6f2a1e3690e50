// Tests of the webhook test doubles: the test PKI (standing in for the web's certificate
// authorities), the HTTPS receiver (a customer's endpoint) and the DNS server (a resolver an
// attacker controls). Also pins how Bun verifies a custom CA, which inferd's delivery relies on.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { X509Certificate } from "node:crypto";
import { createSocket } from "node:dgram";
import { Resolver } from "node:dns/promises";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import https from "node:https";
import type { LookupFunction } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startDns, type DnsServer } from "./fixtures/dns";
import { startReceiver, type Receiver } from "./fixtures/receiver";
import { makeTestPki, type TestPki } from "./fixtures/tls";

const TMP = mkdtempSync(join(tmpdir(), "inferd-webhook-fixtures-"));
let pki: TestPki;
/** A certificate for hook.test only (no IP address), so an IP connection must name the host to verify. */
let namesOnly: TestPki;

beforeAll(() => {
  pki = makeTestPki(join(TMP, "pki"), ["localhost", "hook.test"]);
  namesOnly = makeTestPki(join(TMP, "names-only"), ["hook.test"], { ips: [] });
});

afterAll(() => rmSync(TMP, { recursive: true, force: true }));

type Answer = { status: number; headers: Record<string, string | string[] | undefined>; body: string };

/** One node:https request; `chunks` are written separately (chunked encoding when no length is set). */
function httpsRequest(opts: https.RequestOptions, chunks: (string | Uint8Array)[] = []): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = https.request({ agent: false, ...opts }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (d: string) => (body += d));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      res.on("error", reject);
    });
    req.on("error", reject);
    for (const c of chunks) req.write(c);
    req.end();
  });
}

/** The error code a promise rejects with (throws if it resolves). */
async function errorCode(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    return String((err as { code?: string }).code);
  }
  throw new Error("expected a failure");
}

/** A lookup that never asks DNS: every name "resolves" to `address` (inferd's pinned, pre-checked IP). */
function pinnedLookup(address: string, calls: string[] = []): LookupFunction {
  return ((hostname: string, options: { all?: boolean }, callback: (...args: unknown[]) => void) => {
    calls.push(hostname);
    if (options.all) callback(null, [{ address, family: 4 }]);
    else callback(null, address, 4);
  }) as LookupFunction;
}

describe("makeTestPki", () => {
  test("writes a CA and a server certificate for the names and 127.0.0.1, signed by that CA", () => {
    for (const f of [pki.caFile, pki.certFile, pki.keyFile]) expect(existsSync(f)).toBe(true);
    expect(readFileSync(pki.caFile, "utf8")).toBe(pki.caPem);
    const ca = new X509Certificate(pki.caPem);
    const leaf = new X509Certificate(pki.certPem);
    expect(ca.ca).toBe(true);
    expect(leaf.ca).toBe(false);
    expect(leaf.checkIssued(ca)).toBe(true);
    expect(leaf.verify(ca.publicKey)).toBe(true);
    expect(leaf.subjectAltName).toBe("DNS:localhost, DNS:hook.test, IP Address:127.0.0.1");
    expect(new X509Certificate(namesOnly.certPem).subjectAltName).toBe("DNS:hook.test");
    expect(pki.keyPem).toContain("PRIVATE KEY");
  });

  test("each call makes a new CA", () => {
    const other = makeTestPki(join(TMP, "other"), ["localhost"]);
    expect(other.caPem).not.toBe(pki.caPem);
    expect(new X509Certificate(other.certPem).checkIssued(new X509Certificate(pki.caPem))).toBe(false);
  });
});

describe("receiver: TLS", () => {
  let r: Receiver;
  beforeAll(async () => {
    r = await startReceiver({ pki });
  });
  afterAll(() => r.close());

  test("fetch with tls.ca verifies; without the CA it fails verification", async () => {
    const res = await fetch(r.url("/hook"), { method: "POST", body: "{}", tls: { ca: pki.caPem } });
    expect(res.status).toBe(200);
    expect(await res.text()).toBe("ok");
    expect(await errorCode(fetch(r.url("/hook")))).toBe("UNABLE_TO_VERIFY_LEAF_SIGNATURE");
  });

  test("node:https with ca verifies; without it fails", async () => {
    const res = await httpsRequest({ host: "localhost", port: r.port, path: "/h", ca: pki.caPem });
    expect(res).toMatchObject({ status: 200, body: "ok" });
    expect(await errorCode(httpsRequest({ host: "localhost", port: r.port, path: "/h" }))).toBe(
      "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
    );
  });

  test("a CA from another PKI is rejected", async () => {
    const stranger = makeTestPki(join(TMP, "stranger"), ["localhost"]);
    expect(await errorCode(fetch(r.url("/"), { tls: { ca: stranger.caPem } }))).toBe("UNABLE_TO_VERIFY_LEAF_SIGNATURE");
  });

  test("a host name missing from the certificate is rejected", async () => {
    const other = await startReceiver({ pki: namesOnly });
    try {
      expect(await errorCode(fetch(`https://127.0.0.1:${other.port}/`, { tls: { ca: namesOnly.caPem } }))).toBe(
        "ERR_TLS_CERT_ALTNAME_INVALID",
      );
    } finally {
      await other.close();
    }
  });
});

describe("receiver: recording and scripted answers", () => {
  let r: Receiver;
  beforeAll(async () => {
    r = await startReceiver({ pki, hostname: "localhost" });
  });
  afterAll(() => r.close());
  const ca = () => pki.caPem;

  test("records method, path, lower-cased headers and the body byte for byte", async () => {
    const before = r.requests().length;
    const body = new Uint8Array([0x7b, 0x22, 0xc3, 0xa9, 0x22, 0x7d, 0x0d, 0x0a, 0x00, 0xff, 0xfe, 0x20]);
    const t0 = Date.now();
    await fetch(r.url("/hooks/a?x=1"), {
      method: "POST",
      body,
      headers: { "X-Service-Event": "job", "Content-Type": "application/json" },
      tls: { ca: ca() },
    });
    const got = r.requests()[before];
    expect(got.method).toBe("POST");
    expect(got.path).toBe("/hooks/a?x=1");
    expect(got.headers["x-service-event"]).toBe("job");
    expect(got.headers["content-type"]).toBe("application/json");
    expect(Object.keys(got.headers).every((k) => k === k.toLowerCase())).toBe(true);
    expect(got.bodyBytes).toEqual(body);
    expect(got.at).toBeGreaterThanOrEqual(t0);
  });

  test("a chunked body from node:https arrives as the exact concatenation", async () => {
    const before = r.requests().length;
    const parts = ['{"event":"job.completed",', '"context":{"ü":"€ \\u0000"},', '"ts":"2025-01-01T00:00:00Z"}'];
    const res = await httpsRequest(
      {
        host: "localhost",
        port: r.port,
        method: "POST",
        path: "/c",
        ca: ca(),
        headers: { "content-type": "application/json" },
      },
      parts,
    );
    expect(res.status).toBe(200);
    const got = r.requests()[before];
    expect(got.headers["transfer-encoding"]).toBe("chunked");
    expect(got.rawBody).toBe(parts.join(""));
    expect(got.bodyBytes).toEqual(new TextEncoder().encode(parts.join("")));
  });

  test("setBehaviour scripts the status and body per request index", async () => {
    const start = r.requests().length;
    r.setBehaviour((_req, i) => (i === start ? { status: 500, body: "boom" } : { status: 204 }));
    const first = await fetch(r.url("/s"), { method: "POST", body: "1", tls: { ca: ca() } });
    expect(first.status).toBe(500);
    expect(await first.text()).toBe("boom");
    const second = await fetch(r.url("/s"), { method: "POST", body: "2", tls: { ca: ca() } });
    expect(second.status).toBe(204);
    r.setBehaviour(() => ({}));
    expect((await fetch(r.url("/"), { tls: { ca: ca() } })).status).toBe(200);
  });

  test("a delayed answer really takes that long, and a client timeout fires first", async () => {
    r.setBehaviour(() => ({ status: 200, body: "late", delayMs: 400 }));
    const t0 = performance.now();
    const res = await fetch(r.url("/slow"), { tls: { ca: ca() } });
    expect(await res.text()).toBe("late");
    expect(performance.now() - t0).toBeGreaterThanOrEqual(390);
    const err = await fetch(r.url("/slow"), { tls: { ca: ca() }, signal: AbortSignal.timeout(100) }).catch(
      (e: Error) => e,
    );
    expect((err as Error).name).toBe("TimeoutError");
    r.setBehaviour(() => ({}));
  });

  test("a redirect answers 302/307 with Location and is not followed when redirect is manual", async () => {
    const before = r.requests().length;
    r.setBehaviour(() => ({ redirectTo: r.url("/elsewhere") }));
    const res = await fetch(r.url("/r"), { method: "POST", body: "x", redirect: "manual", tls: { ca: ca() } });
    expect(res.status).toBe(302);
    expect(res.headers.get("location")).toBe(r.url("/elsewhere"));
    r.setBehaviour(() => ({ status: 307, redirectTo: "https://localhost:1/x" }));
    const viaNode = await httpsRequest({ host: "localhost", port: r.port, method: "POST", path: "/r", ca: ca() }, [
      "x",
    ]);
    expect(viaNode.status).toBe(307);
    expect(viaNode.headers.location).toBe("https://localhost:1/x");
    expect(
      r
        .requests()
        .slice(before)
        .map((q) => q.path),
    ).toEqual(["/r", "/r"]);
    r.setBehaviour(() => ({}));
  });

  test("waitForRequests resolves once enough arrived and fails with the count after its deadline", async () => {
    const n = r.requests().length;
    void fetch(r.url("/later"), { method: "POST", body: "w", tls: { ca: ca() } });
    const all = await r.waitForRequests(n + 1, 5_000);
    expect(all[n].path).toBe("/later");
    const late = (await r.waitForRequests(n + 5, 50).catch((e) => e)) as Error;
    expect(late.message).toContain(`expected ${n + 5} request(s) within 50 ms`);
    expect(late.message).toContain(`got ${n + 1}`);
  });

  test("url() uses the chosen host name", () => {
    expect(r.url("/p")).toBe(`https://localhost:${r.port}/p`);
    expect(r.url("/p", "hook.test")).toBe(`https://hook.test:${r.port}/p`);
  });
});

describe("receiver: crash and restart", () => {
  test("closing refuses connections; a new receiver on the same port answers again", async () => {
    const first = await startReceiver({ pki });
    const port = first.port;
    expect((await fetch(first.url("/"), { tls: { ca: pki.caPem } })).status).toBe(200);
    await first.close();
    expect(await errorCode(fetch(first.url("/"), { tls: { ca: pki.caPem } }))).toBe("ECONNREFUSED");
    const again = await startReceiver({ pki, port });
    try {
      expect(again.port).toBe(port);
      expect((await fetch(again.url("/"), { tls: { ca: pki.caPem } })).status).toBe(200);
      expect(again.requests()).toHaveLength(1);
    } finally {
      await again.close();
    }
  });

  test("closing drops a request that is waiting on a delayed answer", async () => {
    const r = await startReceiver({ pki, behaviour: () => ({ delayMs: 10_000 }) });
    const pending = fetch(r.url("/"), { method: "POST", body: "x", tls: { ca: pki.caPem } });
    await r.waitForRequests(1, 5_000);
    await r.close();
    expect(await errorCode(pending)).toBe("ECONNRESET");
  });
});

describe("connecting to a pinned address while verifying the host name", () => {
  let r: Receiver;
  beforeAll(async () => {
    r = await startReceiver({ pki: namesOnly, hostname: "hook.test" });
  });
  afterAll(() => r.close());

  test("node:https: host hook.test, servername hook.test, lookup → 127.0.0.1, ca: verified", async () => {
    const calls: string[] = [];
    const before = r.requests().length;
    const opts = {
      host: "hook.test",
      port: r.port,
      method: "POST",
      path: "/pinned",
      servername: "hook.test",
      lookup: pinnedLookup("127.0.0.1", calls),
    };
    const res = await httpsRequest({ ...opts, ca: namesOnly.caPem }, ['{"a":1}']);
    expect(res.status).toBe(200);
    expect(calls).toEqual(["hook.test"]);
    const got = r.requests()[before];
    expect(got.headers.host).toBe(`hook.test:${r.port}`);
    expect(got.rawBody).toBe('{"a":1}');
    expect(await errorCode(httpsRequest(opts))).toBe("UNABLE_TO_VERIFY_LEAF_SIGNATURE");
    expect(await errorCode(httpsRequest({ ...opts, servername: "evil.test", ca: namesOnly.caPem }))).toBe(
      "ERR_TLS_CERT_ALTNAME_INVALID",
    );
  });

  test("node:https: lookup is called with all: true, so it must answer with the array form", async () => {
    const single = ((_h: string, _o: unknown, cb: (e: null, a: string, f: number) => void) =>
      cb(null, "127.0.0.1", 4)) as unknown as LookupFunction;
    const opts = {
      host: "hook.test",
      port: r.port,
      path: "/",
      servername: "hook.test",
      ca: namesOnly.caPem,
      lookup: single,
    };
    expect(await errorCode(httpsRequest(opts))).toBe("ERR_INVALID_IP_ADDRESS");
  });

  test("fetch: URL with the IP, tls.serverName hook.test and Host header: verified against the name", async () => {
    const before = r.requests().length;
    const url = `https://127.0.0.1:${r.port}/pinned`;
    const res = await fetch(url, {
      method: "POST",
      body: "b",
      headers: { host: `hook.test:${r.port}` },
      tls: { ca: namesOnly.caPem, serverName: "hook.test" },
    });
    expect(res.status).toBe(200);
    expect(r.requests()[before].headers.host).toBe(`hook.test:${r.port}`);
    expect(await errorCode(fetch(url, { tls: { ca: namesOnly.caPem, serverName: "evil.test" } }))).toBe(
      "ERR_TLS_CERT_ALTNAME_INVALID",
    );
    expect(await errorCode(fetch(url, { tls: { ca: namesOnly.caPem } }))).toBe("ERR_TLS_CERT_ALTNAME_INVALID");
  });

  test("the whole path: resolve through the test DNS, then connect to that address as hook.test", async () => {
    const dns = await startDns({ records: { "hook.test": ["127.0.0.1"] } });
    try {
      const resolver = new Resolver();
      resolver.setServers([dns.server]);
      const [address] = await resolver.resolve4("hook.test");
      const res = await httpsRequest({
        host: "hook.test",
        port: r.port,
        path: "/",
        servername: "hook.test",
        ca: namesOnly.caPem,
        lookup: pinnedLookup(address),
      });
      expect(res.status).toBe(200);
      expect(dns.queries()).toEqual([{ name: "hook.test", type: "A" }]);
    } finally {
      await dns.close();
    }
  });
});

test("Bun honours NODE_EXTRA_CA_CERTS (read at start-up) for fetch and node:https", async () => {
  const r = await startReceiver({ pki });
  const script = `
    const https = require("node:https");
    const viaFetch = await fetch(process.argv[1]).then((r) => r.status, (e) => e.code);
    const viaHttps = await new Promise((done) => https.get(process.argv[1], (s) => { s.resume(); done(s.statusCode); }).on("error", (e) => done(e.code)));
    console.log(JSON.stringify({ viaFetch, viaHttps }));`;
  const run = async (extra: string | undefined) => {
    const env: Record<string, string> = {};
    for (const [k, v] of Object.entries(process.env)) if (v !== undefined && k !== "NODE_EXTRA_CA_CERTS") env[k] = v;
    if (extra) env.NODE_EXTRA_CA_CERTS = extra;
    const proc = Bun.spawn([process.execPath, "-e", script, r.url("/")], { env, stdout: "pipe", stderr: "pipe" });
    const [out, err, code] = await Promise.all([
      new Response(proc.stdout).text(),
      new Response(proc.stderr).text(),
      proc.exited,
    ]);
    if (code !== 0) throw new Error(`child exited ${code}: ${err}`);
    return JSON.parse(out);
  };
  try {
    expect(await run(pki.caFile)).toEqual({ viaFetch: 200, viaHttps: 200 });
    expect(await run(undefined)).toEqual({
      viaFetch: "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
      viaHttps: "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
    });
  } finally {
    await r.close();
  }
});

/** A raw DNS query: id, RD set, one question. */
function rawQuery(id: number, name: string, qtype: number): Buffer {
  const labels = name.split(".").map((l) => Buffer.concat([Buffer.from([l.length]), Buffer.from(l, "latin1")]));
  const head = Buffer.alloc(12);
  head.writeUInt16BE(id, 0);
  head[2] = 0x01;
  head.writeUInt16BE(1, 4);
  const tail = Buffer.alloc(5);
  tail.writeUInt16BE(qtype, 1);
  tail.writeUInt16BE(1, 3);
  return Buffer.concat([head, ...labels, tail]);
}

/** Sends one datagram to the DNS fixture and returns the reply. */
function exchange(port: number, query: Buffer): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const sock = createSocket("udp4");
    const timer = setTimeout(() => (sock.close(), reject(new Error("no DNS reply"))), 2_000);
    sock.once("message", (msg) => {
      clearTimeout(timer);
      sock.close();
      resolve(msg);
    });
    sock.send(query, port, "127.0.0.1");
  });
}

describe("dns", () => {
  let dns: DnsServer;
  let resolver: Resolver;
  beforeAll(async () => {
    dns = await startDns({ records: { "hook.test": ["127.0.0.1"], "both.test": ["127.0.0.2", "::1"] } });
    resolver = new Resolver();
    resolver.setServers([dns.server]);
  });
  afterAll(() => dns.close());

  test("answers A and AAAA with TTL 0", async () => {
    expect(dns.server).toBe(`127.0.0.1:${dns.port}`);
    expect(await resolver.resolve4("hook.test", { ttl: true })).toEqual([{ address: "127.0.0.1", ttl: 0 }]);
    expect(await resolver.resolve4("both.test")).toEqual(["127.0.0.2"]);
    expect(await resolver.resolve6("both.test", { ttl: true })).toEqual([{ address: "::1", ttl: 0 }]);
  });

  test("answers change after set() (rebinding) and remove() gives NXDOMAIN", async () => {
    dns.set("rebind.test", ["203.0.113.7"]); // documentation range: resolved here, never connected to
    expect(await resolver.resolve4("rebind.test")).toEqual(["203.0.113.7"]);
    dns.set("REBIND.test.", ["127.0.0.1", "127.0.0.3"]);
    expect(await resolver.resolve4("rebind.test")).toEqual(["127.0.0.1", "127.0.0.3"]);
    dns.remove("rebind.test");
    expect(await errorCode(resolver.resolve4("rebind.test"))).toBe("ENOTFOUND");
    expect(() => dns.set("bad.test", ["not-an-ip"])).toThrow("not an IP address");
  });

  test("unknown names get NXDOMAIN, and every question is recorded", async () => {
    const before = dns.queries().length;
    expect(await errorCode(resolver.resolve4("nope.test"))).toBe("ENOTFOUND");
    expect(await errorCode(resolver.resolve6("nope.test"))).toBe("ENOTFOUND");
    expect(dns.queries().slice(before)).toEqual([
      { name: "nope.test", type: "A" },
      { name: "nope.test", type: "AAAA" },
    ]);
  });

  test("wire format: header flags, question echoed as sent, answer behind a compression pointer", async () => {
    const query = rawQuery(0xbeef, "HoOk.TeSt", 1);
    const reply = await exchange(dns.port, query);
    const qEnd = query.length;
    expect(reply.readUInt16BE(0)).toBe(0xbeef);
    expect(reply[2]).toBe(0x85); // QR, opcode 0, AA, RD
    expect(reply[3] & 0x0f).toBe(0); // NOERROR
    expect([reply.readUInt16BE(4), reply.readUInt16BE(6), reply.readUInt16BE(8), reply.readUInt16BE(10)]).toEqual([
      1, 1, 0, 0,
    ]);
    expect(reply.subarray(12, qEnd)).toEqual(query.subarray(12));
    const rr = reply.subarray(qEnd);
    expect(rr.readUInt16BE(0)).toBe(0xc00c);
    expect([rr.readUInt16BE(2), rr.readUInt16BE(4), rr.readUInt32BE(6), rr.readUInt16BE(10)]).toEqual([1, 1, 0, 4]);
    expect([...rr.subarray(12)]).toEqual([127, 0, 0, 1]);
    expect(reply.length).toBe(qEnd + 16);
  });

  test("wire format: AAAA of an IPv4-only name is an empty NOERROR; unknown name is NXDOMAIN", async () => {
    const empty = await exchange(dns.port, rawQuery(7, "hook.test", 28));
    expect(empty[3] & 0x0f).toBe(0);
    expect(empty.readUInt16BE(6)).toBe(0);
    const nx = await exchange(dns.port, rawQuery(8, "nope.test", 1));
    expect(nx[3] & 0x0f).toBe(3);
    expect([nx.readUInt16BE(4), nx.readUInt16BE(6)]).toEqual([1, 0]);
    const v6 = await exchange(dns.port, rawQuery(9, "both.test", 28));
    expect(v6.readUInt16BE(6)).toBe(1);
    expect([...v6.subarray(v6.length - 16)]).toEqual([...Array(15).fill(0), 1]);
    // Bun's resolver reports this empty answer as ENOTFOUND (Node's says ENODATA): either way, no address.
    await expect(resolver.resolve6("hook.test")).rejects.toThrow();
  });
});
