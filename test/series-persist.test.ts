/** Charts survive a restart, on the embedded SQLite store (series-persist.pg.test.ts runs the same suite on PostgreSQL). */
import { seriesPersistSuite } from "./suites/series-persist";

seriesPersistSuite("sqlite");
