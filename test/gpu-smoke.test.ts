/**
 * bench/gpu-smoke.ts (issue 34) is for real GPU machines; here it runs against the fakes
 * (`--fakes`: fake engines and nvidia-smi, a tiny GGUF) so the script itself is known to work, and
 * each check it makes passes for the engines inferd drives.
 */
import { expect, test } from "bun:test";
import { join } from "node:path";
import { repoRoot } from "./helpers/proc";

test("against the fakes, every check of vLLM and llama.cpp is ok", async () => {
  const p = Bun.spawn([process.execPath, join(repoRoot, "bench/gpu-smoke.ts"), "--fakes", "--only", "vllm,llamacpp"], {
    cwd: repoRoot,
    stdout: "pipe",
    stderr: "pipe",
  });
  const [out, err] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text()]);
  expect({ code: await p.exited, err: err.slice(-2000) }).toMatchObject({ code: 0 });
  for (const engine of ["vllm", "llamacpp"])
    for (const check of [
      "ready only when loaded",
      "slots",
      "served name",
      "streaming usage",
      "GPU selection",
      "API key in the command",
      "tool calls",
    ])
      expect(out).toMatch(new RegExp(`${engine}\\s+${check}\\s+ok`));
  expect(out).toContain("gpu-smoke: 14 ok, 0 failed, 0 skipped");
  expect(out).not.toContain("sglang");
}, 120_000);
