/** Charts survive a restart, on PostgreSQL (a fresh database of the test cluster per server: test/helpers/postgres.ts). */
import { seriesPersistSuite } from "./suites/series-persist";

seriesPersistSuite("postgres");
