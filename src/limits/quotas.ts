import { eq, sql } from "drizzle-orm";
import type { Db } from "../db";
import { memoize } from "../db/memo";
import { first, rows } from "../db/raw";
import { projects } from "../db/schema";
import type { QuotaSource } from "./limiter";

/**
 * The limiter's view of the store: tokens used per key or project in a day or month (from the
 * daily usage), and each project's quotas (memoised until the store changes).
 */
export function storeQuotas(db: Db, flush: () => Promise<void>): QuotaSource {
  const quotas = memoize(
    db,
    async (id: string) => {
      const p = await first(
        db.select({ d: projects.tokensPerDay, m: projects.tokensPerMonth }).from(projects).where(eq(projects.id, id)),
      );
      return { tokensPerDay: p?.d ?? null, tokensPerMonth: p?.m ?? null };
    },
    ["projects"],
  );
  return {
    tokensUsed: async (scope, id, period) => {
      await flush(); // what was counted in memory is in the store before it is summed
      const who = scope === "key" ? sql`key_id = ${id}` : sql`project_id = ${id}`;
      const when = period.length === 10 ? sql`day = ${period}` : sql`day LIKE ${`${period}-%`}`;
      const r = await rows<{ n: number | string | null }>(
        db,
        sql`SELECT SUM(input_tokens + output_tokens) AS n FROM usage_daily WHERE ${who} AND ${when}`,
      );
      return Number(r[0]?.n ?? 0);
    },
    projectQuotas: quotas,
  };
}
