/**
 * A failed or restarting replica's reason: the supervisor's message, then (after a marker line) the
 * runtime's last lines of output. One leaf module so the agent, the server and the dashboard split it alike.
 */

/** The line between the message and the quoted output. */
export const LAST_OUTPUT = "\n--- last output ---\n";

/** A reason made of `message` and the runtime's last `lines`. */
export const reasonWithOutput = (message: string, lines: string): string => `${message}${LAST_OUTPUT}${lines}`;

/**
 * The message and the quoted output (undefined when there is none).
 * @example splitReason("exited with code 1\n--- last output ---\nboom") // → ["exited with code 1", "boom"]
 */
export function splitReason(reason: string): [message: string, output: string | undefined] {
  const at = reason.indexOf(LAST_OUTPUT);
  return at < 0 ? [reason, undefined] : [reason.slice(0, at), reason.slice(at + LAST_OUTPUT.length)];
}

/** A reason without the runtime's output it quotes (that output is in the log already). */
export const withoutOutput = (reason: string): string => splitReason(reason)[0];

/**
 * A reason as a data-plane client (a tenant's key) may read it: the message without the runtime's
 * output, and every absolute path shortened to its last part, so the host's directories stay the
 * operator's (the dashboard and the admin API keep the whole reason).
 * @example publicReason("cannot read /home/op/.inferd/models/x.gguf\n--- last output ---\n…") // → "cannot read …/x.gguf"
 */
export function publicReason(reason: string): string {
  return withoutOutput(reason).replace(
    /(?<![\w:/.])\/[^\s"'`,;()]+/g,
    (path) => `…/${path.replace(/\/+$/, "").split("/").pop() ?? ""}`,
  );
}
