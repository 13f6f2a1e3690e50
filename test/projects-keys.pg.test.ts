/** Projects and keys through the admin API, on PostgreSQL (a fresh database of the test cluster per server: test/helpers/postgres.ts). */
import { projectsKeysSuite } from "./suites/projects-keys";

projectsKeysSuite("postgres");
