import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { servedUi } from "../helpers/ui-suite";
import { until } from "../helpers/browser";
import { openStore, type Store } from "../../src/db";
import { dataPaths } from "../../src/datadir";
import { RequestLog } from "../../src/inspector/log";
import type { RequestRecord } from "../../src/inspector/record";

/**
 * The request inspector in the dashboard against a real `inferd serve`: the Requests tab lists the
 * workload's requests newest first with older ones on demand and new ones arriving while open, the
 * filter narrows them, a request's page draws its timeline (spans in order, widths in proportion)
 * and its captured bodies, and the capture switch turns on and off. Until the data plane fills
 * records (issue 26's tracing part), the test writes them with the server's own writer
 * (RequestLog) into the server's store, as the server's sink would.
 */
const world = servedUi();

describe("the request inspector", () => {
  let store: Store;
  let writer: RequestLog;
  let workloadId = "";
  let projectId = "";
  let keys: { id: string; name: string; prefix: string }[] = [];
  const base = Date.now() - 600_000;
  const enc = new TextEncoder();

  const record = (n: number, over: Partial<RequestRecord> = {}): RequestRecord => ({
    id: `req_ui_${String(n).padStart(3, "0")}`,
    requestId: `req_ui_${String(n).padStart(3, "0")}`,
    at: base + n * 1000,
    workloadId,
    projectId,
    keyId: keys[n % 2].id,
    kind: "request",
    route: "POST /v1/chat/completions",
    model: n % 4 === 0 ? "llama-3-8b" : "qwen-2-7b",
    status: n % 7 === 0 ? 502 : 200,
    errorCode: n % 7 === 0 ? "upstream_error" : null,
    errorMessage: n % 7 === 0 ? "the model runtime did not answer" : null,
    source: null,
    fellBackFrom: [],
    tokensIn: 12,
    tokensOut: 40,
    queueMs: 20,
    ttftMs: 220,
    totalMs: 600,
    assignmentId: "asg_demo",
    workerId: null,
    hostId: null,
    traceId: null,
    spans: [
      { name: "auth", start: 0, end: 5 },
      { name: "queue", start: 5, end: 25 },
      {
        name: "upstream",
        start: 25,
        end: 600,
        attrs: { "server.address": "127.0.0.1", "http.response.status_code": 200 },
      },
      { name: "first token", start: 25, end: 220 },
      { name: "metering", start: 598, end: 600 },
    ],
    ...over,
  });
  const write = async (records: RequestRecord[]) => {
    for (const r of records) writer.add(r);
    await writer.flush();
  };

  beforeAll(async () => {
    const w = await world.srv.createWorkload({
      name: "Inspected chat",
      backend: "vllm",
      model_name: "qwen-2-7b",
      config: { command: "vllm serve qwen-2-7b" },
    });
    workloadId = w.id;
    projectId = w.project_id as string;
    keys = await (await world.srv.admin(`/admin/projects/${world.srv.project}/keys`)).json();
    store = openStore(dataPaths(world.srv.dataDir).db);
    writer = new RequestLog(store.db);
    const records = Array.from({ length: 59 }, (_, i) => record(i + 1));
    records.push(
      record(60, {
        bodies: {
          requestType: "application/json",
          request: enc.encode(
            '{"model":"qwen-2-7b","messages":[{"role":"user","content":"Where did the time go?"}],"stream":true}',
          ),
          responseType: "text/event-stream",
          response: enc.encode('data: {"choices":[{"delta":{"content":"In the queue."}}]}\n\ndata: [DONE]\n\n'),
          truncated: false,
        },
      }),
    );
    await write(records);
  });
  afterAll(() => store?.close());

  test("the Requests tab lists newest first, loads older ones, and shows new ones while open", async () => {
    const { page } = world.ui;
    await world.ui.visit(`/workloads/${workloadId}`);
    await page.getByRole("link", { name: "Requests" }).click();
    await page.waitForURL((u) => u.pathname === `/workloads/${workloadId}/requests`);
    const rows = page.getByTestId("request-row");
    await until(async () => (await rows.count()) === 50, "the first page of 50 rows");
    expect(await rows.first().getByRole("link").textContent()).toBe("req_ui_060");
    expect(await rows.first().textContent()).toContain("bodies kept");
    await page.getByRole("button", { name: "Load older" }).click();
    await until(async () => (await rows.count()) === 60, "all 60 rows after Load older");
    expect(await rows.last().getByRole("link").textContent()).toBe("req_ui_001");
    await page.getByText("That is the oldest request kept").waitFor();
    await write([record(61, { at: Date.now(), model: "fresh-model" })]);
    await until(
      async () => (await rows.first().getByRole("link").textContent()) === "req_ui_061",
      "the new request at the top without a reload",
    );
    expect(await rows.count()).toBe(61);
    await world.ui.checkWidths("inspector");
  });

  test("the filter narrows by status, key and text", async () => {
    const { page } = world.ui;
    await world.ui.visit(`/workloads/${workloadId}/requests`);
    const rows = page.getByTestId("request-row");
    await until(async () => (await rows.count()) === 50, "the first page");
    const form = page.getByRole("form", { name: "Filter the requests" });
    await form.getByLabel("Status").selectOption({ label: "Failed or refused" });
    await form.getByRole("button", { name: "Filter" }).click();
    await until(async () => (await rows.count()) === 8, "the 8 failed requests");
    for (const text of await rows.allTextContents()) expect(text).toContain("upstream_error");
    await form.getByLabel("Status").selectOption({ label: "Any" });
    await form.getByLabel("Key").selectOption({ value: keys[1].id });
    await form.getByLabel("Request id, trace id or model").fill("llama");
    await form.getByRole("button", { name: "Filter" }).click();
    // Odd n (key 1) with n % 4 === 0 (llama) never meet: no row.
    await page.getByTestId("no-requests").waitFor();
    await form.getByLabel("Key").selectOption({ value: keys[0].id });
    await form.getByRole("button", { name: "Filter" }).click();
    await until(async () => (await rows.count()) === 15, "the 15 llama requests of key 0");
    for (const text of await rows.allTextContents()) expect(text).toContain("llama-3-8b");
    await form.getByRole("button", { name: "Clear" }).click();
    await until(async () => (await rows.count()) === 50, "the whole list again");
  });

  test("a request's page draws its spans in order with widths in proportion, and its bodies", async () => {
    const { page } = world.ui;
    await world.ui.visit(`/workloads/${workloadId}/requests`);
    await page.getByRole("link", { name: "req_ui_060" }).click();
    await page.waitForURL((u) => u.pathname === `/workloads/${workloadId}/requests/req_ui_060`);
    const spans = page.getByTestId("span");
    await until(async () => (await spans.count()) === 5, "five spans");
    const names = await spans.locator("strong").allTextContents();
    expect(names).toEqual(["auth", "queue", "upstream", "first token", "metering"]);
    const boxes = await Promise.all((await page.getByTestId("span-bar").all()).map((b) => b.boundingBox()));
    const [, queue, upstream, firstToken] = boxes.map((b) => b!);
    // upstream (575 ms) is 28.75 times queue (20 ms); first token (195 ms) 9.75 times.
    expect(upstream.width / queue.width).toBeCloseTo(28.75, 0);
    expect(firstToken.width / queue.width).toBeCloseTo(9.75, 0);
    expect(upstream.x).toBeGreaterThan(queue.x);
    expect(await spans.nth(2).textContent()).toContain("server.address127.0.0.1");
    await page.getByText("0 ms", { exact: true }).first().waitFor();
    expect(await page.getByTestId("body-request").textContent()).toContain('"content": "Where did the time go?"');
    expect(await page.getByTestId("body-response").textContent()).toContain(
      'data: {"choices":[{"delta":{"content":"In the queue."}}]}',
    );
    await world.ui.checkWidths("inspector-request");
    await page.emulateMedia({ colorScheme: "dark" });
    await world.ui.checkWidths("inspector-request-dark");
    await page.emulateMedia({ colorScheme: "light" });
    await page.getByRole("link", { name: "← All requests" }).click();
    await page
      .getByRole("link", { name: "req_ui_001" })
      .or(page.getByRole("button", { name: "Load older" }))
      .first()
      .waitFor();
    await world.ui.visit(`/workloads/${workloadId}/requests/req_ui_002`);
    await page.getByTestId("no-bodies").waitFor();
  });

  test("capture turns on for a chosen time, shows until when, and stops", async () => {
    const { page } = world.ui;
    await world.ui.visit(`/workloads/${workloadId}/requests`);
    const state = page.getByTestId("capture-state");
    await state.getByText("Bodies are not kept").waitFor();
    await page.getByRole("button", { name: "Keep bodies for 1 h" }).click();
    await state.getByText("Capturing").waitFor();
    const until1h = (await (await world.srv.admin(`/admin/workloads/${workloadId}`)).json()).capture_until as string;
    expect(Math.abs(Date.parse(until1h) - Date.now() - 3_600_000)).toBeLessThan(120_000);
    expect(await state.textContent()).toMatch(/left/);
    await world.ui.checkWidths("inspector-capturing");
    await page.getByRole("button", { name: "Stop capturing" }).click();
    await state.getByText("Bodies are not kept").waitFor();
    expect((await (await world.srv.admin(`/admin/workloads/${workloadId}`)).json()).capture_until).toBeNull();
    world.ui.expectNoErrors("capture on and off");
  });
});
