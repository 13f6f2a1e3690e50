/** The workloads control plane, on PostgreSQL (a fresh database of the test cluster per server: test/helpers/postgres.ts). */
import { workloadsSuite } from "./suites/workloads";

workloadsSuite("postgres");
