import { eq } from "drizzle-orm";
import type { Db } from "../db";
import { memoize } from "../db/memo";
import { projects } from "../db/schema";
import type { QuotaSource } from "./limiter";

/**
 * The limiter's view of the store: tokens used per key or project in a day or month (from the
 * daily usage), and each project's quotas (memoised until the store changes).
 */
export function storeQuotas(db: Db, flush: () => void): QuotaSource {
  const byDay = db.$client.prepare<{ n: number | null }, [string, string]>("SELECT SUM(input_tokens + output_tokens) AS n FROM usage_daily WHERE key_id = ? AND day = ?");
  const byMonth = db.$client.prepare<{ n: number | null }, [string, string]>("SELECT SUM(input_tokens + output_tokens) AS n FROM usage_daily WHERE key_id = ? AND day LIKE ? || '-%'");
  const projDay = db.$client.prepare<{ n: number | null }, [string, string]>("SELECT SUM(input_tokens + output_tokens) AS n FROM usage_daily WHERE project_id = ? AND day = ?");
  const projMonth = db.$client.prepare<{ n: number | null }, [string, string]>("SELECT SUM(input_tokens + output_tokens) AS n FROM usage_daily WHERE project_id = ? AND day LIKE ? || '-%'");
  const quotas = memoize(db, (id: string) => {
    const p = db.select({ d: projects.tokensPerDay, m: projects.tokensPerMonth }).from(projects).where(eq(projects.id, id)).get();
    return { tokensPerDay: p?.d ?? null, tokensPerMonth: p?.m ?? null };
  });
  return {
    tokensUsed: (scope, id, period) => {
      flush(); // what was counted in memory is on disk before it is summed
      const q = period.length === 10 ? (scope === "key" ? byDay : projDay) : scope === "key" ? byMonth : projMonth;
      return q.get(id, period)?.n ?? 0;
    },
    projectQuotas: (id) => quotas(id),
  };
}
