/** The request inspector's API on PostgreSQL (a fresh database of the test cluster: test/helpers/postgres.ts). */
import { inspectorSuite } from "./suites/inspector";

inspectorSuite("postgres");
