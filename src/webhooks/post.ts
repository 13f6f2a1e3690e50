import { request } from "node:https";
import { rootCertificates } from "node:tls";
import { readFileSync } from "node:fs";
import { isIP } from "node:net";
import { checkUrlShape, resolveChecked, type AddressPolicy } from "./address";

/** What a receiver answered (or why there was no answer). */
export interface PostResult {
  ok: boolean;
  status_code: number | null;
  body: string;
  error: string | null;
  duration_ms: number;
}

/** How long a receiver has to answer (the contract's 3 seconds). */
export const RECEIVER_TIMEOUT_MS = 3000;
/** How much of a receiver's answer is kept. */
const KEEP_BODY = 1024;

/**
 * The CA list for receivers: undefined (the runtime's own roots, which already include
 * NODE_EXTRA_CA_CERTS) unless `--webhook-ca-file` adds CAs, then the system roots plus those.
 * Passing no list keeps each connection from building a trust store of its own.
 */
export function caBundle(extraFile: string | undefined): string[] | undefined {
  return extraFile ? [...rootCertificates, readFileSync(extraFile, "utf8")] : undefined;
}

/**
 * POSTs a webhook: checks the URL, resolves the host and checks the address at this moment, then
 * connects to exactly that address (no second lookup) with TLS verified for the host name. Redirects
 * are not followed; no answer within 3 s is a failure. Never throws.
 */
export async function postWebhook(
  rawUrl: string,
  body: string,
  headers: Record<string, string>,
  policy: AddressPolicy,
  ca: string[] | undefined,
  timeoutMs = RECEIVER_TIMEOUT_MS,
): Promise<PostResult> {
  const started = performance.now();
  const done = (r: Omit<PostResult, "duration_ms">): PostResult => ({
    ...r,
    duration_ms: Math.round(performance.now() - started),
  });
  let url: URL;
  let target: { address: string; family: 4 | 6 };
  try {
    url = checkUrlShape(rawUrl);
    target = await resolveChecked(url, policy);
  } catch (e) {
    return done({ ok: false, status_code: null, body: "", error: (e as Error).message });
  }
  return new Promise<PostResult>((resolve) => {
    let settled = false;
    const finish = (r: Omit<PostResult, "duration_ms">) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(done(r));
    };
    const req = request(
      {
        host: url.hostname.replace(/^\[|\]$/g, ""),
        port: url.port ? Number(url.port) : 443,
        path: `${url.pathname}${url.search}`,
        method: "POST",
        headers: { ...headers, "content-length": String(Buffer.byteLength(body)) },
        ...(isIP(url.hostname.replace(/^\[|\]$/g, "")) ? {} : { servername: url.hostname }),
        ...(ca ? { ca } : {}),
        agent: false,
        lookup: (_host: string, opts: { all?: boolean }, cb: (...args: unknown[]) => void) =>
          opts?.all
            ? cb(null, [{ address: target.address, family: target.family }])
            : cb(null, target.address, target.family),
      } as never,
      (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on("data", (c: Buffer) => {
          if (size < KEEP_BODY) chunks.push(c);
          size += c.length;
        });
        res.on("end", () => {
          const status = res.statusCode ?? 0;
          finish({
            ok: status >= 200 && status < 300,
            status_code: status,
            body: Buffer.concat(chunks).toString("utf8").slice(0, KEEP_BODY),
            error: status >= 300 && status < 400 ? `redirect to ${res.headers.location ?? "?"} not followed` : null,
          });
        });
        res.on("error", (e) => finish({ ok: false, status_code: res.statusCode ?? null, body: "", error: e.message }));
      },
    );
    const timer = setTimeout(() => {
      finish({ ok: false, status_code: null, body: "", error: `no answer within ${timeoutMs / 1000} s` });
      req.destroy();
    }, timeoutMs);
    req.on("error", (e) => finish({ ok: false, status_code: null, body: "", error: e.message }));
    req.end(body);
  });
}
