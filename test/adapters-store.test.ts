/** A workload's LoRA adapters on SQLite. */
import { adaptersSuite } from "./suites/adapters";

adaptersSuite("sqlite");
