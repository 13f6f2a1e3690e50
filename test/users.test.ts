/** Users, roles and sessions through the API, on the embedded SQLite store (users.pg.test.ts runs the same suite on PostgreSQL). */
import { usersSuite } from "./suites/users";

usersSuite("sqlite");
