#!/usr/bin/env bun
/**
 * Model downloads from the fake Hugging Face hub (test/fixtures/hf-hub.ts, in its own process, its
 * CDN on a second port) serving one GGUF of random bytes (256 MiB; --quick: 64 MiB):
 *  (a) throughput of `pullModel` (resolve → 302 → CDN, sha256 while writing in a worker thread —
 *      and once more with the hashing in this thread — size and hash check, rename, snapshot
 *      symlink) next to `curl -L -o` of the same resolve URL, the same piped through
 *      `tee | sha256sum` (a download checked as pullModel checks it), and a plain fetch-to-file loop
 *      (no hashing); runs interleaved, in MiB/s, with the ratios to both curl baselines;
 *  (b) resume: the CDN closes the connection at 50%, `pullModel` retries with `Range`; the bytes
 *      fetched again are reported as a % of the bytes already stored.
 * The exit code is 0 unless something failed (2 when stopped by the time limit).
 *
 *   bun bench/models.ts [--quick]
 */
import { randomFillSync } from "node:crypto";
import { closeSync, mkdtempSync, openSync, rmSync, statSync, writeFileSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DEFAULT_HASH_WORKER_MIN_BYTES } from "../agent/models/download";
import { HubClient } from "../agent/models/hub";
import type { PullPlan } from "../agent/models/source";
import { pullModel } from "../agent/models/pull";
import { parseSource } from "../agent/models/source";
import type { FakeRequest } from "../test/fixtures/hf-hub";
import {
  fmt,
  machineLoad,
  parseQuickArgs,
  percentile,
  printTable,
  REPO_ROOT,
  runBenchmark,
  spawnWithTail,
  type Cell,
} from "./lib";

const USAGE = "usage: bun bench/models.ts [--quick]";
const { quick: QUICK } = parseQuickArgs(process.argv.slice(2), USAGE);
const SIZE = (QUICK ? 64 : 256) << 20;
const RUNS = QUICK ? 3 : 5;
const RESUMES = 3;
const REPO = "bench/Big-GGUF";
const FILE = "Big-Q8_0.gguf";
const HARD_LIMIT_MS = 5 * 60_000;
const MIB = 1 << 20;

/** Writes `bytes` of random data (8 MiB at a time). */
function writeRandom(path: string, bytes: number): void {
  const fd = openSync(path, "w");
  const block = Buffer.allocUnsafe(8 * MIB);
  for (let done = 0; done < bytes; done += block.length)
    writeSync(fd, randomFillSync(block), 0, Math.min(block.length, bytes - done));
  closeSync(fd);
}

/** Starts the fake hub as a child process; resolves with its URLs once it printed them. */
async function startHub(dir: string, file: string) {
  const config = join(dir, "hub.json");
  writeFileSync(config, JSON.stringify({ repos: { [REPO]: { files: { [FILE]: file } } }, separateCdn: true }));
  const env = Object.fromEntries(Object.entries(process.env).filter((e): e is [string, string] => e[1] !== undefined));
  const child = spawnWithTail([process.execPath, join(REPO_ROOT, "test/fixtures/hf-hub.ts"), config], {
    env,
    name: "fake hub",
  });
  const deadline = Date.now() + 60_000;
  while (!child.stdoutHead().includes("\n")) {
    if (Date.now() > deadline || child.proc.exitCode !== null)
      throw new Error(`the fake hub did not start:\n${child.output()}`);
    await Bun.sleep(20);
  }
  return { child, ...(JSON.parse(child.stdoutHead().split("\n")[0]) as { url: string; cdnUrl: string }) };
}

/** A way to download the file into a folder; resolves with the path written. */
type Method = { name: string; run: (out: string) => Promise<string> };

/** One timed download: seconds taken; throws when the result is not the whole file. */
async function timed(m: Method, out: string): Promise<number> {
  const t0 = performance.now();
  const path = await m.run(out);
  const s = (performance.now() - t0) / 1000;
  if (statSync(path).size !== SIZE) throw new Error(`${m.name} wrote ${statSync(path).size} bytes, not ${SIZE}`);
  return s;
}

/** The three ways to download the file, each into a fresh folder under `out`. */
function methods(hub: HubClient, plan: PullPlan, resolveUrl: string): Method[] {
  return [
    {
      name: "curl -L -o",
      run: async (out) => {
        const dest = join(out, FILE);
        const p = Bun.spawn(["curl", "-sS", "-L", "-o", dest, resolveUrl], { stdout: "ignore", stderr: "pipe" });
        if ((await p.exited) !== 0) throw new Error(`curl failed: ${await new Response(p.stderr).text()}`);
        return dest;
      },
    },
    {
      name: "curl | tee | sha256sum",
      run: async (out) => {
        const dest = join(out, FILE);
        const p = Bun.spawn(["sh", "-c", 'curl -sS -L "$1" | tee "$2" | sha256sum', "sh", resolveUrl, dest], {
          stdout: "pipe",
          stderr: "pipe",
        });
        if ((await p.exited) !== 0) throw new Error(`curl | sha256sum failed: ${await new Response(p.stderr).text()}`);
        if (!(await new Response(p.stdout).text()).startsWith(plan.files[0].sha256!))
          throw new Error("curl | sha256sum: wrong sha256");
        return dest;
      },
    },
    { name: "pullModel", run: async (out) => (await pullModel(plan, { modelsDir: out, hub })).entry },
    {
      name: "pullModel, hash inline",
      run: async (out) => (await pullModel(plan, { modelsDir: out, hub, hashWorkerMinBytes: Infinity })).entry,
    },
    {
      name: "fetch → file (no hash)",
      run: async (out) => {
        const dest = join(out, FILE);
        const res = await fetch(resolveUrl);
        const fd = openSync(dest, "w");
        for await (const chunk of res.body!) writeSync(fd, chunk);
        closeSync(fd);
        return dest;
      },
    },
  ];
}

/** (a): each method `RUNS` times, interleaved (the order rotates each round). */
async function throughput(list: Method[], dir: string): Promise<Map<string, number[]>> {
  const rates = new Map<string, number[]>(list.map((m) => [m.name, []]));
  for (let round = 0; round < RUNS; round++) {
    for (let k = 0; k < list.length; k++) {
      const m = list[(round + k) % list.length];
      const out = mkdtempSync(join(dir, "run-"));
      const s = await timed(m, out);
      rates.get(m.name)!.push(SIZE / MIB / s);
      rmSync(out, { recursive: true, force: true });
    }
    process.stdout.write(".");
  }
  console.log();
  return rates;
}

/** (b): the CDN drops at 50%; what the retry fetched again, from the fake's request log. */
async function resume(hubUrl: string, hub: HubClient, plan: PullPlan, dir: string): Promise<Cell[][]> {
  const rows: Cell[][] = [];
  for (let i = 0; i < RESUMES; i++) {
    const seenBefore = ((await (await fetch(`${hubUrl}/_fake/requests`)).json()) as FakeRequest[]).length;
    await fetch(`${hubUrl}/_fake/faults`, {
      method: "POST",
      body: JSON.stringify({ reset: true, dropAfter: { bytes: SIZE / 2 } }),
    });
    const out = mkdtempSync(join(dir, "resume-"));
    await pullModel(plan, { modelsDir: out, hub, retryDelayMs: () => 0 });
    rmSync(out, { recursive: true, force: true });
    const log = ((await (await fetch(`${hubUrl}/_fake/requests`)).json()) as FakeRequest[])
      .slice(seenBefore)
      .filter((r) => r.server === "cdn" && r.method === "GET");
    const stored = log[0].bytes;
    const refetched = log.reduce((a, r) => a + r.bytes, 0) - SIZE;
    rows.push([
      i + 1,
      log.length,
      fmt(stored / MIB, 1),
      log[1]?.range ?? "-",
      fmt(refetched / 1024, 0),
      `${fmt((100 * refetched) / stored, 3)}%`,
    ]);
  }
  return rows;
}

process.exit(
  await runBenchmark(HARD_LIMIT_MS, async (cleanup) => {
    console.log(
      `models benchmark${QUICK ? " (quick)" : ""}: one ${SIZE / MIB} MiB file, ${RUNS} runs per method; pullModel hashes in a worker from ${DEFAULT_HASH_WORKER_MIN_BYTES / MIB} MiB; ${machineLoad()}`,
    );
    const dir = mkdtempSync(join(tmpdir(), "inferd-bench-models-"));
    cleanup.add("temp dir", () => rmSync(dir, { recursive: true, force: true }));
    const file = join(dir, FILE);
    writeRandom(file, SIZE);
    const fake = await startHub(dir, file);
    cleanup.add("fake hub", () => fake.child.stop());
    const hub = new HubClient({ endpoint: fake.url, token: "" });
    const plan = await hub.plan(parseSource(`hf:${REPO}/${FILE}`));
    console.log(`fake hub ${fake.url} (pid ${fake.child.pid}), CDN ${fake.cdnUrl}`);
    const list = methods(hub, plan, hub.fileUrl(REPO, "main", FILE));
    const rates = await throughput(list, dir);
    const median = (name: string) => percentile(rates.get(name)!, 50);
    const ratio = (name: string, base: string) => `${fmt(median(name) / median(base), 2)}x`;
    const rows = list.map((m) => [
      m.name,
      fmt(median(m.name), 0),
      fmt(Math.min(...rates.get(m.name)!), 0),
      fmt(Math.max(...rates.get(m.name)!), 0),
      ratio(m.name, "curl -L -o"),
      ratio(m.name, "curl | tee | sha256sum"),
    ]);
    printTable(
      ["method", "MiB/s (median)", "min", "max", "vs curl", "vs curl+sha256sum"],
      rows,
      `(a) download throughput, ${SIZE / MIB} MiB over loopback`,
    );
    const resumed = await resume(fake.url, hub, plan, dir);
    printTable(
      ["run", "CDN GETs", "MiB stored at drop", "retry asked", "KiB fetched again", "of stored"],
      resumed,
      "(b) resume after the CDN dropped the connection at 50%",
    );
    console.log(`\ndone; ${machineLoad()}`);
  }),
);
