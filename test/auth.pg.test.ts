/** The auth matrix and dashboard sessions, on PostgreSQL (a fresh database of the test cluster per server: test/helpers/postgres.ts). */
import { authSuite } from "./suites/auth";

authSuite("postgres");
