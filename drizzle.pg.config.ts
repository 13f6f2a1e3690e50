import { defineConfig } from "drizzle-kit";

/** drizzle-kit reads this to generate the PostgreSQL migrations into src/db/migrations-pg (run `bun run db:generate`). */
export default defineConfig({
  dialect: "postgresql",
  schema: "./src/db/schema-pg.ts",
  out: "./src/db/migrations-pg",
});
