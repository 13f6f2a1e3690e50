/** Crash safety of jobs and deliveries (kill -9, restart), on the embedded SQLite store (durability.pg.test.ts runs the same suite on PostgreSQL). */
import { durabilitySuite } from "./suites/durability";

durabilitySuite("sqlite");
