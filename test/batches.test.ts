/** The OpenAI Files and Batch APIs, on the embedded SQLite store (batches.pg.test.ts runs the same suite on PostgreSQL). */
import { batchesSuite } from "./suites/batches";

batchesSuite("sqlite");
