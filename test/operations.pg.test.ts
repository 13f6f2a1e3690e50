/** Per-key limits and token quotas across a restart, on PostgreSQL (operations.test.ts runs them on SQLite, with the metrics). */
import { operationsSuite } from "./suites/operations";

operationsSuite("postgres");
