/** Batch job submission, on the embedded SQLite store (jobs-batch.pg.test.ts runs the same suite on PostgreSQL). */
import { jobsBatchSuite } from "./suites/jobs-batch";

jobsBatchSuite("sqlite");
