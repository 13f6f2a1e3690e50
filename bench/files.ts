#!/usr/bin/env bun
/**
 * How long the Files API keeps other requests waiting (issue 32 item 3): `/healthz` is called one
 * request after another, and its longest answer time is printed, while nothing else runs (the
 * baseline, same run), while a 90 MB upload of `{}` lines is refused (past the 50000-line cap),
 * while a valid 90 MB file of 50000 requests is uploaded, and while six parallel downloads of it run
 * (each load in a child process, so this one only times `/healthz`; the phase's time includes the
 * child making its file). Aim: no phase keeps `/healthz` waiting more than 100 ms.
 *
 *   bun bench/files.ts [--quick]        (--quick: 30 MB instead of 90 MB)
 */
import {
  fmt,
  parseQuickArgs,
  printTable,
  runBenchmark,
  startInferdForBench,
  summarize,
  machineLoad,
  benchProjectKey,
  type Cell,
} from "./lib";

const clientAt = process.argv.indexOf("--client");
const { quick: QUICK } = parseQuickArgs(
  process.argv.slice(2, clientAt > 0 ? clientAt : undefined),
  "usage: bun bench/files.ts [--quick]",
);
const MB = QUICK ? 30 : 90;
const BASELINE_MS = 2000;

/** A multipart upload of `bytes` as a `purpose: "batch"` file. */
function form(bytes: Uint8Array): FormData {
  const f = new FormData();
  f.set("purpose", "batch");
  f.set("file", new Blob([bytes as Uint8Array<ArrayBuffer>]), "bench.jsonl");
  return f;
}

/** 50000 valid request lines filling about `mb` MB. */
function requestLines(mb: number): Buffer {
  const n = 50_000;
  const pad = "x".repeat(Math.max(0, Math.floor((mb * 1e6) / n) - 140));
  return Buffer.from(
    `${Array.from({ length: n }, (_, i) => JSON.stringify({ custom_id: `r${i}`, method: "POST", url: "/v1/chat/completions", body: { model: "m", messages: [{ role: "user", content: pad }] } })).join("\n")}\n`,
  );
}

/** `/healthz` answer times (ms), one request after another, until `work` settles (or for `ms` when it is a number). */
async function healthzDuring<T>(
  url: string,
  work: Promise<T> | number,
): Promise<{ result?: T; times: number[]; elapsedMs: number }> {
  const started = performance.now();
  let done = false;
  const settled = typeof work === "number" ? Bun.sleep(work).then(() => undefined) : work;
  void settled.finally(() => (done = true));
  const times: number[] = [];
  while (!done) {
    const t0 = performance.now();
    const r = await fetch(`${url}/healthz`);
    await r.arrayBuffer();
    times.push(performance.now() - t0);
  }
  return { result: (await settled) as T | undefined, times, elapsedMs: performance.now() - started };
}

/**
 * The load of one phase, run in a child process (`--client <job> <url> <key> [<file id>]`) so that
 * this process only times `/healthz`: prints what the server answered.
 */
async function client(job: string, base: string, key: string, id?: string): Promise<string> {
  const auth = { authorization: `Bearer ${key}` };
  if (job === "flood" || job === "valid") {
    const bytes = job === "flood" ? Buffer.from("{}\n".repeat(Math.floor((MB * 1e6) / 3))) : requestLines(MB);
    const r = await fetch(`${base}/files`, { method: "POST", headers: auth, body: form(bytes) });
    const body = await r.json();
    return r.status === 200 ? `200 ${body.id}` : `${r.status} ${body.error?.code ?? ""}`;
  }
  const valid = requestLines(MB);
  const got = await Promise.all(
    Array.from({ length: 6 }, () =>
      fetch(`${base}/files/${id}/content`, { headers: auth }).then(async (r) =>
        r.status === 200 && Buffer.from(await r.arrayBuffer()).equals(valid) ? "ok" : `${r.status}`,
      ),
    ),
  );
  return got.join(",");
}

/** Runs `client(job, …)` in a child process; resolves with what it printed. */
async function inChild(args: string[]): Promise<string> {
  const proc = Bun.spawn([process.execPath, import.meta.path, ...(QUICK ? ["--quick"] : []), "--client", ...args], {
    stdout: "pipe",
    stderr: "inherit",
  });
  const out = await new Response(proc.stdout).text();
  if ((await proc.exited) !== 0) throw new Error(`the client of ${args[0]} failed`);
  return out.trim();
}

if (clientAt > 0) {
  const [job, base, key, id] = process.argv.slice(clientAt + 1);
  console.log(await client(job, base, key, id));
} else {
  process.exitCode = await runBenchmark(10 * 60_000, async (cleanup) => {
    const inferd = await startInferdForBench({
      INFERD_LOCAL_AGENT: "0",
      INFERD_LOG_LEVEL: "warn",
      INFERD_MAX_JOB_BYTES_PER_PROJECT: String(4 * 2 ** 30),
    });
    cleanup.add("inferd", () => inferd.stop());
    const key = await benchProjectKey(inferd);
    const base = `${inferd.url}/endpoint/bench/v1`;
    console.log(
      `inferd at ${inferd.url}; machine load ${machineLoad()}; files of ${MB} MB; the load runs in a child process`,
    );

    const rows: Cell[][] = [];
    const row = (phase: string, outcome: string, r: { times: number[]; elapsedMs: number }) => {
      const s = summarize(r.times);
      rows.push([phase, outcome, fmt(r.elapsedMs / 1000, 1), s.n, fmt(s.p50, 1), fmt(s.p99, 1), fmt(s.max, 1)]);
    };
    row("baseline (no load)", "-", await healthzDuring(inferd.url, BASELINE_MS));
    const refused = await healthzDuring(inferd.url, inChild(["flood", base, key]));
    row(`upload ${MB} MB of {} lines`, refused.result!, refused);
    const stored = await healthzDuring(inferd.url, inChild(["valid", base, key]));
    row(`upload ${MB} MB, 50000 requests`, stored.result!.split(" ")[0], stored);
    const downloads = await healthzDuring(inferd.url, inChild(["download", base, key, stored.result!.split(" ")[1]]));
    row("6 parallel downloads of it", downloads.result!, downloads);
    printTable(
      ["phase", "answer", "seconds", "healthz n", "p50 ms", "p99 ms", "longest ms"],
      rows,
      "/healthz answer times while the Files API works (aim: longest under 100 ms)",
    );
  });
}
