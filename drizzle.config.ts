import { defineConfig } from "drizzle-kit";

/** drizzle-kit reads this to generate SQL migrations into src/db/migrations (run `bun run db:generate`). */
export default defineConfig({
  dialect: "sqlite",
  schema: "./src/db/schema.ts",
  out: "./src/db/migrations",
});
