/** The request inspector's API on the embedded SQLite store (inspector.pg.test.ts runs the same suite on PostgreSQL). */
import { inspectorSuite } from "./suites/inspector";

inspectorSuite("sqlite");
