/** The OpenAI Files and Batch APIs, on PostgreSQL (a fresh database of the test cluster per server: test/helpers/postgres.ts). */
import { batchesSuite } from "./suites/batches";

batchesSuite("postgres");
