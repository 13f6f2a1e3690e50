// Issue 32 item 5, the cluster-wide part: password guesses sent at once to two hosts of one
// PostgreSQL store are counted together before any is checked, so the hosts between them check at
// most the limit (each host alone would let its own 5 through).
import { afterAll, beforeAll, expect, test } from "bun:test";
import { startTestServer, type TestServer } from "./helpers/server";

const PASSWORD = "correct horse battery";

let a: TestServer;
let b: TestServer;
beforeAll(async () => {
  a = await startTestServer({}, { engine: "postgres" });
  b = await startTestServer(
    { INFERD_DATABASE_URL: a.storeEnv.INFERD_DATABASE_URL, INFERD_ADMIN_TOKEN: a.adminToken },
    { engine: "postgres" },
  );
  expect(
    (await a.admin("/admin/users", { body: { email: "hana@example.com", role: "viewer", password: PASSWORD } })).status,
  ).toBe(201);
});
afterAll(async () => {
  await b?.close();
  await a?.close();
});

const guess = (srv: TestServer, password: string) =>
  srv.call("/admin/session", undefined, { body: { email: "hana@example.com", password } });

test("15 concurrent wrong guesses at each of two hosts: at most 5 are checked in all; then the right password is refused on both", async () => {
  const answers = await Promise.all(Array.from({ length: 30 }, (_, i) => guess(i % 2 ? b : a, `guess number ${i}`)));
  const statuses = answers.map((r) => r.status);
  expect(statuses.every((s) => s === 401 || s === 429)).toBe(true);
  expect(statuses.filter((s) => s === 401).length).toBeLessThanOrEqual(5);
  const denied = (await (await a.admin("/admin/audit?action=session.denied")).json()).entries;
  expect(denied.length).toBeLessThanOrEqual(5);
  for (const srv of [a, b]) {
    const r = await guess(srv, PASSWORD);
    expect(r.status).toBe(429);
    expect((await r.json()).error.code).toBe("too_many_attempts");
  }
});
