/** Users, roles and sessions through the API, on PostgreSQL (a fresh database of the test cluster per server: test/helpers/postgres.ts). */
import { usersSuite } from "./suites/users";

usersSuite("postgres");
