/**
 * How the user started inferd, so hints print a command they can paste: `inferd …` for the compiled
 * binary (or a linked `inferd` bin), `bun run start -- …` from a clone started with the start script,
 * `bun <path>/main.ts …` when Bun ran the file directly. Detected once per process.
 */
import { basename, relative } from "node:path";

/** Where the process came from, as `commandPrefix` reads it (injectable for tests). */
export interface Invocation {
  /** `Bun.main`: the entry file (`/$bunfs/root/…` or `B:/~BUN/root/…` inside a compiled binary). */
  main: string;
  /** `process.argv[1]`: the path the entry was started by (a linked bin keeps its own name). */
  argv1: string | undefined;
  /** `npm_lifecycle_event`: the package script `bun run` is running. */
  script: string | undefined;
  cwd: string;
}

/**
 * The command prefix for this process's hints.
 * @example commandPrefix({ main: "/repo/src/main.ts", argv1: "/repo/src/main.ts", script: "start", cwd: "/repo" }) // → "bun run start --"
 */
export function commandPrefix(inv: Invocation): string {
  if (inv.main.startsWith("/$bunfs/") || /^[A-Z]:[\\/]~BUN[\\/]/i.test(inv.main)) return "inferd";
  if (inv.script === "start") return "bun run start --";
  if (inv.argv1 && basename(inv.argv1) === "inferd") return "inferd";
  const rel = relative(inv.cwd, inv.main);
  return `bun ${rel && !rel.startsWith("..") ? rel : inv.main}`;
}

let prefix: string | undefined;

/** This process's command prefix (`inferd`, `bun run start --`, …), detected on first use. */
export function thisCommand(): string {
  return (prefix ??= commandPrefix({
    main: Bun.main,
    argv1: process.argv[1],
    script: process.env.npm_lifecycle_event,
    cwd: process.cwd(),
  }));
}

/**
 * A command as the user should type it here.
 * @example commandHint("serve --host 0.0.0.0") // → "bun run start -- serve --host 0.0.0.0" from a clone, "inferd serve --host 0.0.0.0" for the binary
 */
export function commandHint(args: string): string {
  return `${thisCommand()} ${args}`;
}
