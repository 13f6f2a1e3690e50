/** The job intake and the queue's claim on PostgreSQL (jobs-intake.test.ts runs them on SQLite, with the group-commit units). */
import { jobsIntakeSuite } from "./suites/jobs-intake";

jobsIntakeSuite("postgres");
