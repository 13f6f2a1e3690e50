// The inspector's writer under load: a full slice of records is written at once, not held until the
// once-a-second flush (held records are what every young-generation collection has to walk).
import { afterAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { openStore } from "../src/db";
import { RequestLog } from "../src/inspector/log";
import type { RequestRecord } from "../src/inspector/record";
import { tempDir, waitFor } from "./helpers/proc";

const store = openStore(join(tempDir("inspector-batches"), "inferd.db"));
const sqlite = store.sqlite!;
afterAll(() => sqlite.close());

let n = 0;
/** A finished request as the data plane records it. */
const record = (): RequestRecord => {
  n++;
  return {
    id: `req_batch_${n}`,
    requestId: `req_batch_${n}`,
    at: Date.now(),
    workloadId: "wl_batches",
    projectId: "prj_batches",
    keyId: null,
    kind: "request",
    route: "POST /v1/chat/completions",
    model: "m",
    status: 200,
    errorCode: null,
    errorMessage: null,
    source: null,
    fellBackFrom: [],
    tokensIn: 3,
    tokensOut: 5,
    queueMs: 0,
    ttftMs: 20,
    totalMs: 21,
    assignmentId: null,
    workerId: null,
    hostId: null,
    traceId: null,
    spans: [{ name: "upstream", start: 0, end: 21 }],
  };
};
const stored = () =>
  sqlite.query<{ n: number }, []>("SELECT count(*) AS n FROM request_log WHERE workload_id = 'wl_batches'").get()!.n;

describe("the inspector's writer", () => {
  test("fewer records than a slice wait for the flush; a full slice is written without one", async () => {
    const log = new RequestLog(store.db);
    for (let i = 0; i < 10; i++) log.add(record());
    expect(log.waiting).toBe(10);
    await log.flush();
    expect(stored()).toBe(10);
    // 200 more (a slice): they go at once, with no flush asked for.
    for (let i = 0; i < 200; i++) log.add(record());
    await waitFor(() => (stored() === 210 ? true : undefined), { what: "the full slice written" });
    expect(log.waiting).toBe(0);
    log.close();
  });
});
