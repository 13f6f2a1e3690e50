/** The last line a replica's runtime printed, as plain text, for a status line under its badge. */
import { useEffect, useState } from "preact/hooks";
import { api } from "./api";

// CSI sequences (colours, cursor moves), OSC sequences (titles, links) and two-byte escapes.
const ESCAPES = /\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]/g;

/**
 * The last non-empty line of terminal output, without escape codes; a progress bar redrawn with
 * carriage returns counts as its latest drawing.
 * @example lastLine("loading\r\n\x1b[32mready\x1b[0m\r\n") // → "ready"
 */
export function lastLine(text: string): string {
  const lines = text.replace(ESCAPES, "").split("\n");
  for (let i = lines.length - 1; i >= 0; i--) {
    const drawn = lines[i]
      .split("\r")
      .map((s) => s.trim())
      .filter(Boolean)
      .pop();
    if (drawn) return drawn.replace(/[\x00-\x08\x0b-\x1f\x7f]/g, "");
  }
  return "";
}

/**
 * The last percentage in a line of output (a pull or a loading bar), or null.
 * @example percentIn("pulling 6a0746a1ec1a:  28% ▕███  ▏ 1.3 GB/4.7 GB") // → 28
 */
export function percentIn(line: string): number | null {
  const all = [...line.matchAll(/(\d{1,3}(?:\.\d+)?)\s?%/g)].map((m) => Number(m[1])).filter((n) => n <= 100);
  return all.length ? all[all.length - 1] : null;
}

/** Bytes of output read for the last line: enough for a long line, little to send every poll. */
const TAIL_BYTES = 4096;

/** The last output line of one replica, read every `pollMs` while `active` (kept when it stops). */
export function useLastLine(workloadId: string, assignmentId: string, active: boolean, pollMs = 2000): string {
  const [line, setLine] = useState("");
  useEffect(() => {
    if (!active) return;
    let gone = false;
    const read = async () => {
      if (document.hidden) return;
      try {
        const logs = await api<{ replicas: { text: string }[] }>(
          `/admin/workloads/${encodeURIComponent(workloadId)}/logs?assignment=${encodeURIComponent(assignmentId)}&bytes=${TAIL_BYTES}`,
        );
        if (!gone) setLine(lastLine(logs.replicas[0]?.text ?? ""));
      } catch {}
    };
    void read();
    const timer = setInterval(read, pollMs);
    return () => {
      gone = true;
      clearInterval(timer);
    };
  }, [workloadId, assignmentId, active, pollMs]);
  return line;
}

/** `HH:MM:SS` of a time, as a log line's prefix. */
const clock = (at: number) => new Date(at).toTimeString().slice(0, 8);

/**
 * A writer that puts the time before every line of terminal output (dimmed), given the time each
 * chunk arrived; it remembers across chunks whether the next character starts a line. A progress
 * bar redrawn after `\r` gets the time of its latest drawing.
 * @example const stamp = timeStamper(); stamp("a\r\nb", t) // → "\x1b[2m12:00:00\x1b[22m a\r\n\x1b[2m12:00:00\x1b[22m b"
 */
export function timeStamper(): (text: string, at: number) => string {
  let atLineStart = true;
  return (text, at) => {
    const prefix = `\x1b[2m${clock(at)}\x1b[22m `;
    let out = "";
    for (const ch of text) {
      if (ch === "\n" || ch === "\r") atLineStart = true;
      else if (atLineStart) {
        out += prefix;
        atLineStart = false;
      }
      out += ch;
    }
    return out;
  };
}
