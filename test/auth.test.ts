/** The auth matrix and dashboard sessions, on the embedded SQLite store (auth.pg.test.ts runs the same suite on PostgreSQL). */
import { authSuite } from "./suites/auth";

authSuite("sqlite");
