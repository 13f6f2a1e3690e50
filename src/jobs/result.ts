import { usageOf } from "../dataplane/meter";

/** What a job's run produced, as delivered in the callback's `data`. */
export interface JobData {
  job_id: string;
  status: string;
  payload?: unknown;
  output?: string;
  binary_b64?: string;
  content_type?: string;
  usage?: { input_tokens: number; output_tokens: number; total_tokens: number };
  units?: Record<string, number>;
  metrics: { queue_ms: number; run_ms: number; runs: number };
  error?: { http_status?: number; code: string; message: string };
}

/** Seconds of audio in a PCM WAV file, from its header; undefined when not a WAV. */
export function wavSeconds(b: Uint8Array): number | undefined {
  const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const ascii = (at: number) => String.fromCharCode(...b.subarray(at, at + 4));
  if (b.byteLength < 44 || ascii(0) !== "RIFF" || ascii(8) !== "WAVE") return undefined;
  let at = 12;
  let byteRate = 0;
  while (at + 8 <= b.byteLength) {
    const id = ascii(at);
    const size = dv.getUint32(at + 4, true);
    if (id === "fmt ") byteRate = dv.getUint32(at + 16, true);
    if (id === "data")
      return byteRate ? Math.round((Math.min(size, b.byteLength - at - 8) / byteRate) * 1000) / 1000 : undefined;
    at += 8 + size + (size % 2);
  }
  return undefined;
}

/** The runtime's error message from a JSON or text error body. */
function errorMessage(text: string, status: number): string {
  try {
    const b = JSON.parse(text);
    return (
      b?.error?.message ??
      (typeof b?.error === "string" ? b.error : undefined) ??
      b?.message ??
      b?.detail ??
      `the runtime answered HTTP ${status}`
    );
  } catch {
    return text.trim() || `the runtime answered HTTP ${status}`;
  }
}

/** Plain text a JSON result carries: the assistant's message, a transcript, a completion. */
function textOf(kind: string, p: Record<string, any>): string | undefined {
  if (kind === "chat") return p.choices?.[0]?.message?.content ?? undefined;
  if (kind === "audio_transcriptions") return typeof p.text === "string" ? p.text : undefined;
  return undefined;
}

/**
 * Builds a job's `data` from the runtime's answer: `payload` for JSON, `output` for text,
 * `binary_b64` + `content_type` for audio and images, token `usage`, physical `units`, and `error`
 * when the runtime refused. With `model`, the payload's `model` says that name (the workload's
 * served name) rather than what the runtime calls its model.
 */
export function buildJobData(
  jobId: string,
  kind: string,
  status: number,
  contentType: string,
  bytes: Uint8Array,
  metrics: JobData["metrics"],
  model?: string,
): JobData {
  const text = () => new TextDecoder().decode(bytes);
  if (status < 200 || status >= 300) {
    return {
      job_id: jobId,
      status: "error",
      metrics,
      error: { http_status: status, code: `http_${status}`, message: errorMessage(text(), status) },
    };
  }
  const data: JobData = { job_id: jobId, status: "ok", metrics };
  const type = contentType.split(";")[0].trim().toLowerCase();
  if (type.includes("json")) {
    let p: Record<string, any>;
    try {
      p = JSON.parse(text());
    } catch {
      return {
        job_id: jobId,
        status: "error",
        metrics,
        error: { code: "invalid_runtime_response", message: "the runtime answered invalid JSON" },
      };
    }
    if (model !== undefined && p && typeof p === "object" && typeof p.model === "string") p.model = model;
    data.payload = p;
    const out = textOf(kind, p);
    if (out !== undefined) data.output = out;
    const u = usageOf(p);
    if (u)
      data.usage = {
        input_tokens: u.inputTokens,
        output_tokens: u.outputTokens,
        total_tokens: u.inputTokens + u.outputTokens,
      };
    if (kind.startsWith("images") && Array.isArray(p.data)) {
      data.units = { images: p.data.length };
      const first = p.data.find((d: { b64_json?: string }) => typeof d?.b64_json === "string");
      if (first) {
        data.binary_b64 = first.b64_json;
        data.content_type = "image/png";
      }
    }
  } else if (type.startsWith("text/")) {
    data.output = text();
  } else {
    data.binary_b64 = Buffer.from(bytes).toString("base64");
    data.content_type = type || "application/octet-stream";
    const secs = wavSeconds(bytes);
    if (secs !== undefined) data.units = { audio_seconds: secs };
    if (type.startsWith("image/")) data.units = { images: 1 };
  }
  return data;
}
