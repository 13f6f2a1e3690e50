/** The audit log and the usage export, on the embedded SQLite store (audit-usage.pg.test.ts runs the same suite on PostgreSQL). */
import { auditUsageSuite } from "./suites/audit-usage";

auditUsageSuite("sqlite");
