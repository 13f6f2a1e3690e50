/** Pool join tokens on PostgreSQL (a fresh database of the test cluster: test/helpers/postgres.ts). */
import { joinTokensSuite } from "./suites/join-tokens";

joinTokensSuite("postgres");
