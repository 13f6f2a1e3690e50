/** Projects and keys through the admin API, on the embedded SQLite store (projects-keys.pg.test.ts runs the same suite on PostgreSQL). */
import { projectsKeysSuite } from "./suites/projects-keys";

projectsKeysSuite("sqlite");
