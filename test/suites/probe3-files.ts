import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { cleanup, startInferd, type Inferd } from "../helpers/proc";
import type { Engine } from "../helpers/postgres";
import { exec, rows } from "../../src/db/raw";
import { openPgStore, openStore } from "../../src/db";
import { dataPaths } from "../../src/datadir";

type Fetched = { status: number; body: any };

/** A multipart upload of `bytes` as a `purpose: "batch"` file. */
function form(bytes: Uint8Array, name = "in.jsonl"): FormData {
  const f = new FormData();
  f.set("purpose", "batch");
  f.set("file", new Blob([bytes as Uint8Array<ArrayBuffer>]), name);
  return f;
}

/** `n` valid request lines of about `size` bytes each (with some non-ASCII text), newline-ended. */
function requestLines(n: number, size: number): Buffer {
  const pad = "x".repeat(Math.max(0, size - 150));
  const lines = Array.from({ length: n }, (_, i) =>
    JSON.stringify({
      custom_id: `r${i}`,
      method: "POST",
      url: "/v1/chat/completions",
      body: { model: "m", messages: [{ role: "user", content: `${i} grüße ✓ ${pad}` }] },
    }),
  );
  return Buffer.from(`${lines.join("\n")}\n`);
}

/**
 * Polls `/healthz` one request after another until `work` settles: the longest wait between two
 * answers (the longest the server kept a request waiting), and how many answers came in meanwhile.
 */
async function heartbeat<T>(url: string, work: Promise<T>): Promise<{ result: T; longestMs: number; answers: number }> {
  let done = false;
  const settled = work.finally(() => (done = true));
  let [longestMs, answers, last] = [0, 0, performance.now()];
  while (!done) {
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
    const now = performance.now();
    [longestMs, last] = [Math.max(longestMs, now - last), now];
    answers++;
    await Bun.sleep(10);
  }
  return { result: await settled, longestMs, answers };
}

/**
 * Issue 32 items 3 and 13 (third security probe): the Files API checks uploads with the depth-capped
 * JSON parser, line by line in slices, within caps on line length and count; stores and serves
 * files in chunks inside the buffered-bytes budget, so no upload or download holds up other
 * requests; and an endpoint-scoped key sees only the files it uploaded itself.
 */
export function probe3FilesSuite(engine: Engine): void {
  let s: Inferd;
  let project = "";
  let live = "";
  let scoped = "";
  let scopedToo = "";

  const call = async (path: string, token: string, init: RequestInit = {}): Promise<Response> =>
    fetch(`${s.url}/endpoint/${project}/v1${path}`, {
      ...init,
      headers: { authorization: `Bearer ${token}`, ...(init.headers as Record<string, string>) },
    });
  const json = async (r: Response): Promise<Fetched> => ({ status: r.status, body: await r.json() });
  const upload = (token: string, bytes: Uint8Array) => call("/files", token, { method: "POST", body: form(bytes) });
  const admin = (path: string, body?: unknown) =>
    fetch(`${s.url}${path}`, {
      method: body === undefined ? "GET" : "POST",
      headers: { authorization: `Bearer ${s.adminToken}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  const newKey = async (name: string, extra: Record<string, unknown> = {}) =>
    (await (await admin(`/admin/projects/${project}/keys`, { name, type: "live", ...extra })).json()).secret as string;

  beforeAll(async () => {
    s = await startInferd({
      engine,
      env: { INFERD_LOG_LEVEL: "warn", INFERD_MAX_JOB_BYTES_PER_PROJECT: String(4 * 2 ** 30) },
    });
    project = (await (await admin("/admin/projects", { name: "Files", slug: "files" })).json()).slug;
    expect(
      (await admin(`/admin/projects/${project}/workloads`, { name: "w", backend: "ollama", model_name: "m" })).status,
    ).toBe(201);
    live = await newKey("project-wide");
    scoped = await newKey("scoped", { scope: "endpoints", endpoints: [`${project}/w`] });
    scopedToo = await newKey("scoped-too", { scope: "endpoints", endpoints: [`${project}/w`] });
  });
  afterAll(async () => {
    await s?.stop();
    await cleanup();
  });

  describe("uploads are checked with the depth cap and within caps on lines (3)", () => {
    test("a line nested deeper than 64 levels is refused with a 400 naming the line and the cap", async () => {
      const nested = `${'{"a":'.repeat(100)}1${"}".repeat(100)}`;
      const bomb = "[".repeat(1_500_000);
      for (const [text, line] of [
        [`{"ok":1}\n${nested}\n`, 2],
        [`{"ok":1}\n{"ok":2}\n\n${bomb}`, 4],
      ] as const) {
        const r = await json(await upload(live, Buffer.from(text)));
        expect(r.status).toBe(400);
        expect(r.body.error.code).toBe("invalid_file");
        expect(r.body.error.message).toContain(`line ${line} of the file nests JSON deeper than 64 levels`);
      }
    });

    test("a line longer than 2 MiB is refused with a 413 naming the line; so is a 20 MB depth bomb", async () => {
      const long = Buffer.from(`{"a":1}\n{"b":2}\n{"pad":"${"x".repeat(3 << 20)}"}\n`);
      const r = await json(await upload(live, long));
      expect(r.status).toBe(413);
      expect(r.body.error).toMatchObject({ code: "line_too_long" });
      expect(r.body.error.message).toContain("line 3 of the file");
      expect(r.body.error.message).toContain(`${2 << 20}-byte limit`);
      const bomb = await json(await upload(live, Buffer.from("[".repeat(20_000_000))));
      expect(bomb.status).toBe(413);
      expect(bomb.body.error.message).toContain("line 1 of the file");
    });

    test("more than 50000 lines are refused with a 413 naming the line and the cap", async () => {
      const r = await json(await upload(live, Buffer.from("{}\n".repeat(50_001))));
      expect(r.status).toBe(413);
      expect(r.body.error.code).toBe("too_many_lines");
      expect(r.body.error.message).toContain("more than 50000 lines (line 50001)");
      const fits = await json(await upload(live, Buffer.from("{}\n".repeat(50_000))));
      expect(fits.status).toBe(200);
    });
  });

  describe("files are stored and served in chunks without holding up the server (3)", () => {
    const big = requestLines(20_000, 2000);
    let bigId = "";

    test("a 40 MB upload round-trips byte-exact through its download", async () => {
      expect(big.byteLength).toBeGreaterThan(38 << 20);
      const up = await json(await upload(live, big));
      expect(up.status).toBe(200);
      expect(up.body).toMatchObject({ object: "file", bytes: big.byteLength, purpose: "batch" });
      bigId = up.body.id;
      const r = await call(`/files/${bigId}/content`, live);
      expect(r.status).toBe(200);
      expect(Buffer.from(await r.arrayBuffer()).equals(big)).toBe(true);
    });

    test("/healthz keeps answering while a 90 MB upload of {} lines and six downloads of a 40 MB file run", async () => {
      const flood = Buffer.from("{}\n".repeat(30 << 20));
      const work = Promise.all([
        upload(live, flood).then(json),
        ...Array.from({ length: 6 }, () =>
          call(`/files/${bigId}/content`, live).then(async (r) => Buffer.from(await r.arrayBuffer())),
        ),
      ]);
      const { result, longestMs, answers } = await heartbeat(s.url, work);
      // The aim is 100 ms (bench/files.ts measures it); the bound here only tells a server that
      // keeps answering from one that stops for seconds, on a busy shared machine.
      expect(answers).toBeGreaterThan(1);
      expect(longestMs).toBeLessThan(2000);
      const [refused, ...downloads] = result;
      expect(refused.status).toBe(413);
      for (const d of downloads) expect(d.equals(big)).toBe(true);
    });

    test("a download holds one chunk of --max-buffered-bytes until it ends: past the budget 503, then served again", async () => {
      const budget = 20 << 20;
      const tight = await startInferd({
        engine,
        env: {
          INFERD_LOG_LEVEL: "warn",
          INFERD_MAX_DATA_BODY_BYTES: String(budget),
          INFERD_MAX_BUFFERED_BYTES: String(budget),
        },
      });
      try {
        const post = async (path: string, body: unknown) =>
          (
            await fetch(`${tight.url}${path}`, {
              method: "POST",
              headers: { authorization: `Bearer ${tight.adminToken}`, "content-type": "application/json" },
              body: JSON.stringify(body),
            })
          ).json();
        const p = (await post("/admin/projects", { name: "T", slug: "t" })).slug;
        const key = (await post(`/admin/projects/${p}/keys`, { name: "k", type: "live" })).secret;
        const at = (path: string, init: RequestInit = {}) =>
          fetch(`${tight.url}/endpoint/${p}/v1${path}`, { ...init, headers: { authorization: `Bearer ${key}` } });
        const file = requestLines(9000, 2000);
        const id = (await (await at("/files", { method: "POST", body: form(file) })).json()).id as string;
        // Downloads nobody reads: each holds its chunk of the budget while it waits.
        const held = await Promise.all(Array.from({ length: budget >> 20 }, () => at(`/files/${id}/content`)));
        for (const r of held) expect(r.status).toBe(200);
        const busy = await at(`/files/${id}/content`);
        expect(busy.status).toBe(503);
        expect((await busy.json()).error.code).toBe("server_busy");
        expect(Buffer.from(await held[0].arrayBuffer()).equals(file)).toBe(true);
        for (const r of held.slice(1)) await r.body!.cancel();
        const again = await waitForStatus(() => at(`/files/${id}/content`), 200);
        expect(Buffer.from(await again.arrayBuffer()).equals(file)).toBe(true);
      } finally {
        await tight.stop();
      }
    });

    test("a file stored whole before chunks is still served", async () => {
      const text = Buffer.from('{"old":1}\n{"old":2}\n');
      const id = "file-stored-before-chunks";
      await inStore(s, async (db) => {
        const [{ id: projectId }] = await rows<{ id: string }>(
          db,
          sql`SELECT id FROM projects WHERE slug = ${project}`,
        );
        await exec(
          db,
          sql`INSERT INTO files (id, project_id, batch_id, key_id, filename, purpose, bytes, content, created_at) VALUES (${id}, ${projectId}, NULL, NULL, 'old.jsonl', 'batch', ${text.byteLength}, ${text}, ${new Date().toISOString()})`,
        );
      });
      const r = await call(`/files/${id}/content`, live);
      expect(r.status).toBe(200);
      expect(Buffer.from(await r.arrayBuffer()).equals(text)).toBe(true);
      expect((await json(await call(`/files/${id}`, live, { method: "DELETE" }))).body.deleted).toBe(true);
    });

    test("a deleted file leaves no chunk behind", async () => {
      expect((await json(await call(`/files/${bigId}`, live, { method: "DELETE" }))).body.deleted).toBe(true);
      expect((await call(`/files/${bigId}/content`, live)).status).toBe(404);
      await inStore(s, async (db) => {
        const [{ n }] = await rows<{ n: number | string }>(
          db,
          sql`SELECT count(*) AS n FROM file_chunks WHERE file_id = ${bigId}`,
        );
        expect(Number(n)).toBe(0);
      });
    });
  });

  describe("an endpoint-scoped key sees only the files it uploaded (13)", () => {
    test("404 for another key's upload (list, get, content, delete, batch input); project-wide keys keep their access", async () => {
      const theirs = (await json(await upload(live, Buffer.from('{"by":"project-wide key"}\n')))).body.id as string;
      const mineText = Buffer.from('{"by":"scoped key"}\n');
      const mine = (await json(await upload(scoped, mineText))).body.id as string;

      const listed = (await json(await call("/files", scoped))).body.data.map((f: { id: string }) => f.id);
      expect(listed).toContain(mine);
      expect(listed).not.toContain(theirs);
      for (const [path, method] of [
        [`/files/${theirs}`, "GET"],
        [`/files/${theirs}/content`, "GET"],
        [`/files/${theirs}`, "DELETE"],
      ]) {
        const r = await json(await call(path, scoped, { method }));
        expect(`${method} ${path} ${r.status}`).toBe(`${method} ${path} 404`);
      }
      const batch = await json(
        await call("/batches", scoped, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ input_file_id: theirs, endpoint: "/v1/chat/completions", completion_window: "24h" }),
        }),
      );
      expect(batch.status).toBe(400);
      expect(batch.body.error.message).toContain("not found");
      // Another key scoped to the same endpoint does not see it either.
      expect((await call(`/files/${mine}`, scopedToo)).status).toBe(404);
      expect((await json(await call("/files", scopedToo))).body.data).toEqual([]);

      // The uploader sees its own; the project-wide key sees, reads and deletes both.
      expect((await call(`/files/${mine}`, scoped)).status).toBe(200);
      const all = (await json(await call("/files?limit=10000", live))).body.data.map((f: { id: string }) => f.id);
      expect(all).toEqual(expect.arrayContaining([mine, theirs]));
      expect(Buffer.from(await (await call(`/files/${mine}/content`, live)).arrayBuffer()).equals(mineText)).toBe(true);
      expect((await json(await call(`/files/${mine}`, live, { method: "DELETE" }))).body.deleted).toBe(true);
      expect((await json(await call(`/files/${theirs}`, live, { method: "DELETE" }))).body.deleted).toBe(true);
    });
  });
}

/** Runs `fn` on the running server's store (as another process on the same database would). */
async function inStore(
  s: Inferd,
  fn: (db: Awaited<ReturnType<typeof openPgStore>>["db"]) => Promise<void>,
): Promise<void> {
  const url = s.storeEnv.INFERD_DATABASE_URL;
  const store = url ? await openPgStore(url, 1) : openStore(dataPaths(s.dataDir).db);
  try {
    await fn(store.db);
  } finally {
    await store.close();
  }
}

/** Repeats a request until it answers `status` (a budget given back once a cancelled download is noticed). */
async function waitForStatus(send: () => Promise<Response>, status: number): Promise<Response> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const r = await send();
    if (r.status === status) return r;
    await r.body?.cancel();
    if (Date.now() > deadline) throw new Error(`still ${r.status}, not ${status}`);
    await Bun.sleep(25);
  }
}
