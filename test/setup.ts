import { setDefaultTimeout } from "bun:test";

// Suites start real servers and child processes on shared 2-core machines: give each test room.
// Waits inside tests poll for conditions with their own deadlines; this is only the outer bound.
setDefaultTimeout(90_000);
