/** Issue 32 items 3 and 13: the Files API on PostgreSQL (probe3-files.test.ts runs the same suite on SQLite). */
import { probe3FilesSuite } from "./suites/probe3-files";

probe3FilesSuite("postgres");
