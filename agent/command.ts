/**
 * Command-line handling shared by the host (validation, the dashboard's launch preview) and the
 * agent (launching). Commands are POSIX-shell-like strings; they are split into words here and run
 * without a shell, so nothing in a workload's command is ever interpreted by /bin/sh.
 */

/** A command that cannot be split into words (an unclosed quote, a trailing backslash). */
export class CommandSyntaxError extends Error {}

/**
 * Splits a command into words the way a POSIX shell would for quoting and escapes
 * (no expansion, no operators).
 * @example splitCommand(`vllm serve "my model" --port=8000`) // → ["vllm", "serve", "my model", "--port=8000"]
 */
export function splitCommand(command: string): string[] {
  const words: string[] = [];
  let cur = "";
  let inWord = false;
  let quote: '"' | "'" | null = null;
  for (let i = 0; i < command.length; i++) {
    const c = command[i];
    if (quote === "'") {
      if (c === "'") quote = null;
      else cur += c;
    } else if (quote === '"') {
      if (c === '"') quote = null;
      else if (c === "\\" && i + 1 < command.length && '"\\$`\n'.includes(command[i + 1])) cur += command[++i];
      else cur += c;
    } else if (c === "'" || c === '"') {
      quote = c;
      inWord = true;
    } else if (c === "\\") {
      if (i + 1 >= command.length) throw new CommandSyntaxError("the command ends with a lone backslash");
      const next = command[++i];
      if (next === "\n") continue; // line continuation
      cur += next;
      inWord = true;
    } else if (/\s/.test(c)) {
      if (inWord) words.push(cur);
      cur = "";
      inWord = false;
    } else {
      cur += c;
      inWord = true;
    }
  }
  if (quote) throw new CommandSyntaxError(`the command has an unclosed ${quote === "'" ? "single" : "double"} quote`);
  if (inWord) words.push(cur);
  return words;
}

/**
 * Joins words back into one command string, quoting only where needed.
 * @example joinCommand(["vllm", "serve", "my model"]) // → `vllm serve 'my model'`
 */
export function joinCommand(words: string[]): string {
  return words
    .map((w) => (w !== "" && /^[A-Za-z0-9_\-.,:/=@%+]+$/.test(w) ? w : `'${w.replace(/'/g, `'\\''`)}'`))
    .join(" ");
}

/**
 * The value of a flag in `--name value` or `--name=value` form (any of the given names), or undefined.
 * @example flagValue(["serve", "--port=9000"], ["--port"]) // → "9000"
 */
export function flagValue(args: string[], names: string[]): string | undefined {
  for (let i = 0; i < args.length; i++) {
    for (const n of names) {
      if (args[i] === n) return args[i + 1];
      if (args[i].startsWith(`${n}=`)) return args[i].slice(n.length + 1);
    }
  }
  return undefined;
}

/** True when any of the flags is present, in either form. */
export function hasFlag(args: string[], names: string[]): boolean {
  return args.some((a) => names.some((n) => a === n || a.startsWith(`${n}=`)));
}
