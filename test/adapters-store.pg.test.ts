/** A workload's LoRA adapters on PostgreSQL (a fresh database of the test cluster per server: test/helpers/postgres.ts). */
import { adaptersSuite } from "./suites/adapters";

adaptersSuite("postgres");
