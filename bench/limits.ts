#!/usr/bin/env bun
/**
 * What per-key limits cost on the request path: the limiter's admission and its end-of-request
 * accounting for a key with every limit set (rpm, tpm, max_concurrent, daily and monthly token
 * quotas for the key and its project), against the same calls for a key with none, in this process
 * on the real `Limiter` (the quota counts come from a store read once, then memory).
 * Aim: under 20 µs per request.
 *
 *   bun bench/limits.ts [--quick]
 */
import { Limiter, type LimitedKey, type Ticket } from "../src/limits/limiter";
import { fmt, parseQuickArgs, printTable, summarize } from "./lib";

const { quick: QUICK } = parseQuickArgs(process.argv.slice(2), "usage: bun bench/limits.ts [--quick]");
const N = QUICK ? 50_000 : 500_000;
const ROUNDS = QUICK ? 3 : 7;

/** A limiter whose stored counts are what a store would answer once (memory afterwards). */
const limiter = () =>
  new Limiter({ tokensUsed: () => 0, projectQuotas: () => ({ tokensPerDay: 1e12, tokensPerMonth: 1e12 }) });
const key = (limited: boolean, id: string): LimitedKey =>
  limited
    ? { id, projectId: "prj_bench", rpm: 1e9, tpm: 1e12, maxConcurrent: 1e6, tokensPerDay: 1e12, tokensPerMonth: 1e12 }
    : {
        id,
        projectId: "prj_bench",
        rpm: null,
        tpm: null,
        maxConcurrent: null,
        tokensPerDay: null,
        tokensPerMonth: null,
      };

/** Nanoseconds per request: admit, then the end of the request charged with some tokens. */
function perRequestNs(limited: boolean): number {
  const l = limiter();
  const k = key(limited, `key_${limited}`);
  const finished = {
    workloadId: "wl",
    projectId: "prj_bench",
    keyId: k.id,
    kind: "sync" as const,
    ok: true,
    usage: { inputTokens: 20, outputTokens: 40 },
    durationMs: 1,
    queueMs: 0,
    firstByteMs: 1,
  };
  const t0 = Bun.nanoseconds();
  for (let i = 0; i < N; i++) {
    // Counts already in memory: admission decides at once (no promise), as on the request path.
    const t = l.admit(k) as Ticket;
    t.release();
    l.finished(finished);
  }
  return (Bun.nanoseconds() - t0) / N;
}

const limited: number[] = [];
const none: number[] = [];
perRequestNs(true); // warm up
perRequestNs(false);
for (let r = 0; r < ROUNDS; r++) {
  none.push(perRequestNs(false) / 1000);
  limited.push(perRequestNs(true) / 1000);
}
const [a, b] = [summarize(none), summarize(limited)];
printTable(
  ["key", "µs per request (p50)", "min", "max"],
  [
    ["no limits", fmt(a.p50, 3), fmt(a.min, 3), fmt(a.max, 3)],
    ["every limit and quota", fmt(b.p50, 3), fmt(b.min, 3), fmt(b.max, 3)],
  ],
);
console.log(`limits add ${fmt(b.p50 - a.p50, 3)} µs per request (aim < 20 µs), ${N} requests × ${ROUNDS} rounds`);
