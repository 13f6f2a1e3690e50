/** The audit log and the usage export, on PostgreSQL (a fresh database of the test cluster per server: test/helpers/postgres.ts). */
import { auditUsageSuite } from "./suites/audit-usage";

auditUsageSuite("postgres");
