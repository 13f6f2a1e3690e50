import { afterAll, setDefaultTimeout } from "bun:test";
import { stopTestPostgres } from "./helpers/postgres";

// Suites start real servers and child processes on shared 2-core machines: give each test room.
// Waits inside tests poll for conditions with their own deadlines; this is only the outer bound.
setDefaultTimeout(90_000);

// In a preload, afterAll runs once after the last file: the PostgreSQL cluster the *.pg.test.ts
// suites share (started on first use) is stopped there, so no postgres process outlives the run.
afterAll(stopTestPostgres);
