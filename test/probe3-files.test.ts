/** Issue 32 items 3 and 13: the Files API on the embedded SQLite store (probe3-files.pg.test.ts runs the same suite on PostgreSQL). */
import { probe3FilesSuite } from "./suites/probe3-files";

probe3FilesSuite("sqlite");
