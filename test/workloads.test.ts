/** The workloads control plane, on the embedded SQLite store (workloads.pg.test.ts runs the same suite on PostgreSQL). */
import { workloadsSuite } from "./suites/workloads";

workloadsSuite("sqlite");
