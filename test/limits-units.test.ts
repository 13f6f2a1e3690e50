/**
 * The limiter's quota counts in a cluster: a host keeps a key's day and month counts in memory and
 * reads them again from the store every few seconds (`refreshCounts`), so tokens the other hosts
 * charged count against the quota here too, without losing what this host counted meanwhile.
 */
import { describe, expect, test } from "bun:test";
import { AppError } from "../src/errors";
import { Limiter, type LimitedKey, type QuotaSource } from "../src/limits/limiter";

const key: LimitedKey = {
  id: "k1",
  projectId: "p1",
  rpm: null,
  tpm: null,
  maxConcurrent: null,
  tokensPerDay: 100,
  tokensPerMonth: null,
};
const now = Date.UTC(2026, 10, 24, 12);
const day = "2026-11-24";

/** The shared store's daily usage: what every host flushed, per `scope:id:period`. */
function store(): { source: QuotaSource; stored: Map<string, number>; reads: number } {
  const stored = new Map<string, number>();
  const s = {
    stored,
    reads: 0,
    source: {
      tokensUsed: async (scope: "key" | "project", id: string, period: string) => {
        s.reads++;
        return stored.get(`${scope}:${id}:${period}`) ?? 0;
      },
      projectQuotas: () => ({ tokensPerDay: null, tokensPerMonth: null }),
    } satisfies QuotaSource,
  };
  return s;
}

/** Admits and ends one request of `tokens`; the status a client would see (200 or the refusal's). */
async function call(limiter: Limiter, tokens: number): Promise<number | string> {
  try {
    const t = await limiter.admit(key);
    limiter.finished({
      workloadId: "w1",
      projectId: key.projectId,
      keyId: key.id,
      kind: "sync",
      ok: true,
      usage: { inputTokens: tokens, outputTokens: 0 },
      durationMs: 5,
      queueMs: 0,
      firstByteMs: 1,
    });
    t.release();
    return 200;
  } catch (e) {
    return e instanceof AppError ? `${e.status} ${e.code}` : String(e);
  }
}

describe("quota counts read again from the store", () => {
  test("tokens another host charged refuse the key here after a refresh, not before", async () => {
    const s = store();
    const limiter = new Limiter(s.source, () => now);
    expect(await call(limiter, 40)).toBe(200); // count read (0), then 40 counted here
    s.stored.set(`key:k1:${day}`, 40 + 70); // this host's 40 flushed, and 70 from another host
    expect(await call(limiter, 1)).toBe(200); // still the count in memory: 41
    await limiter.refreshCounts();
    expect(await call(limiter, 1)).toBe("429 quota_exceeded");
  });

  test("tokens counted here while the store is read are kept", async () => {
    const s = store();
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const slow: QuotaSource = {
      ...s.source,
      tokensUsed: async (...args) =>
        s.reads > 0 ? (await gate, s.source.tokensUsed(...args)) : s.source.tokensUsed(...args),
    };
    const limiter = new Limiter(slow, () => now);
    expect(await call(limiter, 10)).toBe(200);
    s.stored.set(`key:k1:${day}`, 50);
    const refreshing = limiter.refreshCounts();
    expect(await call(limiter, 45)).toBe(200); // counted (55) while the store is being read
    release();
    await refreshing;
    // 50 stored plus the 45 counted during the read: 95, so one more small request passes, a big one is then refused.
    expect(await call(limiter, 5)).toBe(200);
    expect(await call(limiter, 1)).toBe("429 quota_exceeded");
  });

  test("counts of a day that has passed are dropped, not read", async () => {
    const s = store();
    let t = now;
    const limiter = new Limiter(s.source, () => t);
    expect(await call(limiter, 10)).toBe(200);
    const before = s.reads;
    t += 24 * 3_600_000;
    await limiter.refreshCounts();
    expect(s.reads).toBe(before);
  });
});
