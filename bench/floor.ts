#!/usr/bin/env bun
/**
 * What a data-plane request costs inferd beyond the floor any proxy written on Bun pays: the chat
 * request of bench/ab-steady.ts at concurrency 64, alternated round by round with the same request
 * through a bare proxy (Bun.serve reading the body, one fetch to the same fake runtime, its answer
 * passed back; no auth, queue, meter or record). Prints each side's median CPU per request (the
 * server process, user+system from /proc), p99 and requests/s, and the line
 * `floor: inferd X µs per request, a bare Bun proxy Y µs (inferd's own work Z µs)`. With `<ref>`, that
 * tree's inferd runs in the same rounds (its own bench/lib.ts starts it, as bench/ab-steady.ts does)
 * and a second line compares the two: `own work: <ref> X µs, working tree Y µs (B/A)`.
 *
 *   bun bench/floor.ts [<ref>] [--rounds 6] [--seconds 4]
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Cleanups, fmt, printTable, REPO_ROOT, runBenchmark, waitForListening } from "./lib";
import { CONCURRENCY, chatSide, MODEL, median, steadyArgs } from "./steady";
import { git, worktreeOf } from "./worktree";

const USAGE = "usage: bun bench/floor.ts [<ref>] [--rounds N] [--seconds S]";

/** The bare proxy: the least a Bun server can do to pass a chat request on to a runtime and its answer back. */
const PROXY_SOURCE = `const upstream = process.env.UPSTREAM;
const server = Bun.serve({
  port: 0,
  hostname: "127.0.0.1",
  async fetch(request) {
    const body = await request.text();
    const r = await fetch(upstream + "/v1/chat/completions", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body,
    });
    const answer = await r.arrayBuffer();
    return new Response(answer, { status: r.status, headers: { "content-type": r.headers.get("content-type") ?? "application/json" } });
  },
});
console.log("listening on http://127.0.0.1:" + server.port);
`;

/** A tree's inferd with the bench workload (the tree's own bench/lib.ts starts it). */
async function inferdOf(root: string, cleanup: Cleanups) {
  const lib = (await import(`${root}/bench/lib.ts`)) as typeof import("./lib");
  const inferd = await lib.startInferdForBench({ FAKE_DELAY_MS: "20", FAKE_LOAD_MS: "0" });
  cleanup.add(`the server of ${root}`, () => inferd.stop());
  return { inferd, wl: await lib.createBenchWorkload(inferd, { model: MODEL }) };
}

const { ref, rounds, seconds } = steadyArgs(process.argv.slice(2), USAGE, 6);
const a = ref ? worktreeOf(ref) : undefined;
console.log(
  `c=${CONCURRENCY}, ${rounds} rounds of ${seconds} s per side, alternated${a ? `; A = ${ref} (${a.commit.slice(0, 12)}), B = working tree (${git(["rev-parse", "--short=12", "HEAD"])})` : ""}`,
);
process.exitCode = await runBenchmark(10 * 60_000, async (cleanup) => {
  const old = a ? await inferdOf(a.dir, cleanup) : undefined;
  const { inferd, wl } = await inferdOf(REPO_ROOT, cleanup);
  const dir = mkdtempSync(join(tmpdir(), "inferd-floor-"));
  cleanup.add("the proxy's folder", async () => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, "proxy.ts"), PROXY_SOURCE);
  // The proxy passes requests on to the working tree's fake runtime.
  const proxy = Bun.spawn(["bun", join(dir, "proxy.ts")], {
    env: { ...process.env, UPSTREAM: wl.runtimeUrl },
    stdout: "pipe",
    stderr: "pipe",
  });
  cleanup.add("the bare proxy", async () => {
    proxy.kill();
    await proxy.exited;
  });
  let said = "";
  void (async () => {
    for await (const chunk of proxy.stdout) said += new TextDecoder().decode(chunk);
  })();
  const proxyUrl = await waitForListening(proxy, () => said, 30_000);
  const chat = (x: { inferd: { pid: number }; wl: { endpoint: string; liveKey: string } }, name: string) =>
    chatSide(name, x.inferd.pid, `${x.wl.endpoint}/v1/chat/completions`, { authorization: `Bearer ${x.wl.liveKey}` });
  const mine = chat({ inferd, wl }, a ? "inferd (working tree)" : "inferd");
  const bare = chatSide("bare Bun proxy", proxy.pid, `${proxyUrl}/v1/chat/completions`, {});
  const theirs = old ? chat(old, `inferd (${ref})`) : undefined;
  const sides = theirs ? [theirs, mine, bare] : [mine, bare];
  for (const s of sides) await s.warm();
  for (let round = 0; round < rounds; round++)
    for (const s of round % 2 ? [...sides].reverse() : sides) await s.run(seconds * 1000);
  const each = (xs: number[]) => xs.map((x) => fmt(x, 0)).join(" ");
  printTable(
    ["server", "CPU per request (µs)", "p99 (ms)", "requests/s", "CPU per round"],
    sides.map((s) => [
      s.name,
      fmt(median(s.figures.cpu), 1),
      fmt(median(s.figures.p99), 1),
      fmt(median(s.figures.rps), 0),
      each(s.figures.cpu),
    ]),
    `the chat request at c=${CONCURRENCY}: medians of ${rounds} rounds`,
  );
  const floor = median(bare.figures.cpu);
  const own = median(mine.figures.cpu);
  console.log(
    `floor: inferd ${fmt(own, 1)} µs per request, a bare Bun proxy ${fmt(floor, 1)} µs (inferd's own work ${fmt(own - floor, 1)} µs)`,
  );
  if (theirs) {
    const before = median(theirs.figures.cpu) - floor;
    console.log(
      `own work: ${ref} ${fmt(before, 1)} µs, working tree ${fmt(own - floor, 1)} µs (${fmt((own - floor) / before, 3)}x)`,
    );
  }
});
