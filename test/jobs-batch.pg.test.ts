/** Batch job submission, on PostgreSQL (a fresh database of the test cluster per server: test/helpers/postgres.ts). */
import { jobsBatchSuite } from "./suites/jobs-batch";

jobsBatchSuite("postgres");
