/** Crash safety of jobs and deliveries (kill -9, restart), on PostgreSQL (a fresh database of the test cluster per server: test/helpers/postgres.ts). */
import { durabilitySuite } from "./suites/durability";

durabilitySuite("postgres");
