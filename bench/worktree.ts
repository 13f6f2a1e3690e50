/**
 * A worktree of a git ref beside this checkout, for benchmarks that compare two trees (bench/ab.ts,
 * bench/ab-steady.ts): `inferd-ab-<commit>` in the system's temp folder, node_modules shared with
 * this checkout, made once per commit.
 */
import { existsSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { REPO_ROOT } from "./lib";

/** Runs git in this checkout; throws with its message when it fails. */
export function git(args: string[]): string {
  const p = Bun.spawnSync(["git", ...args], { cwd: REPO_ROOT, stdout: "pipe", stderr: "pipe" });
  if (p.exitCode !== 0) throw new Error(`git ${args.join(" ")}: ${p.stderr.toString().trim()}`);
  return p.stdout.toString().trim();
}

/** A worktree of `ref` with this checkout's node_modules; made once per commit. */
export function worktreeOf(ref: string): { dir: string; commit: string } {
  const commit = git(["rev-parse", "--verify", `${ref}^{commit}`]);
  const dir = join(tmpdir(), `inferd-ab-${commit.slice(0, 12)}`);
  if (!existsSync(dir)) git(["worktree", "add", "--detach", dir, commit]);
  const modules = join(dir, "node_modules");
  if (!existsSync(modules)) symlinkSync(join(REPO_ROOT, "node_modules"), modules);
  return { dir, commit };
}
