/** Pool join tokens on the embedded SQLite store (join-tokens.pg.test.ts runs the same suite on PostgreSQL). */
import { joinTokensSuite } from "./suites/join-tokens";

joinTokensSuite("sqlite");
