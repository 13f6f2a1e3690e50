import { describe, expect, test } from "bun:test";
import { meteredStream, type MeterOptions, type Usage } from "../src/dataplane/meter";
import { bytesOf, type SseEvent, SseDecoder } from "../src/dataplane/sse";
import { pipeTranslator, type StreamTranslator } from "../src/dataplane/stream-pipe";

const enc = new TextEncoder();
const dec = new TextDecoder();
type Seen = { event: string; data: string; comments: number; raw: string; complete: boolean };
const seen = (evs: SseEvent[]): Seen[] =>
  evs.map((e) => ({
    event: e.event,
    data: e.data,
    comments: e.comments,
    raw: dec.decode(e.raw),
    complete: e.complete,
  }));

/** Every event of `pieces` fed one after another, then the end. */
function decodeAll(pieces: (string | Uint8Array)[]): Seen[] {
  const d = new SseDecoder();
  return [...pieces.flatMap((p) => seen(d.push(p))), ...seen(d.end())];
}

/** A stream with a comment, a named event, two data lines, a multi-byte character and a last event without its blank line. */
const STREAM =
  ': keep-alive\n\nevent: message_start\ndata: {"a":1}\n\ndata: {"b":\ndata: "héllo ☀️"}\nid: 7\n\ndata: [DONE]';
const EXPECTED: Seen[] = [
  { event: "", data: "", comments: 1, raw: ": keep-alive\n\n", complete: true },
  {
    event: "message_start",
    data: '{"a":1}',
    comments: 0,
    raw: 'event: message_start\ndata: {"a":1}\n\n',
    complete: true,
  },
  {
    event: "",
    data: '{"b":\n"héllo ☀️"}',
    comments: 0,
    raw: 'data: {"b":\ndata: "héllo ☀️"}\nid: 7\n\n',
    complete: true,
  },
  { event: "", data: "[DONE]", comments: 0, raw: "data: [DONE]", complete: false },
];

describe("SseDecoder", () => {
  test("several events in one chunk, comments, names, data lines joined, a last event without blank line", () => {
    expect(decodeAll([STREAM])).toEqual(EXPECTED);
  });

  test("CRLF and lone CR line ends give the same events, with their own bytes", () => {
    for (const nl of ["\r\n", "\r"]) {
      const text = STREAM.replaceAll("\n", nl);
      expect(decodeAll([text])).toEqual(EXPECTED.map((e) => ({ ...e, raw: e.raw.replaceAll("\n", nl) })));
    }
  });

  test("any split of the bytes gives the same events, and the events' bytes are the input's", () => {
    for (const nl of ["\n", "\r\n", "\r"]) {
      const bytes = enc.encode(STREAM.replaceAll("\n", nl));
      const whole = decodeAll([bytes]);
      for (let i = 1; i < bytes.length; i++)
        expect(decodeAll([bytes.subarray(0, i), bytes.subarray(i)])).toEqual(whole);
      expect(decodeAll(Array.from(bytes, (b) => Uint8Array.of(b)))).toEqual(whole);
      expect(whole.map((e) => e.raw).join("")).toBe(dec.decode(bytes));
    }
  });

  test("an event is given as soon as its blank line arrives; a CR at the end waits for a possible LF", () => {
    const d = new SseDecoder();
    expect(d.push("data: 1\n")).toEqual([]);
    expect(seen(d.push("\n")).map((e) => e.data)).toEqual(["1"]);
    expect(d.push("data: 2\r\n\r")).toEqual([]);
    expect(seen(d.push("\n")).map((e) => e.raw)).toEqual(["data: 2\r\n\r\n"]);
    expect(d.push("data: 3\r\r")).toEqual([]);
    expect(seen(d.push("data: 4")).map((e) => e.raw)).toEqual(["data: 3\r\r"]);
    expect(d.rest).toBe("data: 4");
    expect(seen(d.end()).map((e) => [e.data, e.complete])).toEqual([["4", false]]);
    expect(d.end()).toEqual([]);
  });

  test("field details: one space taken off, none needed, a line without colon, other fields ignored", () => {
    const evs = new SseDecoder().push("data:x\ndata:  y\ndata\nretry: 5\nid: 1\nevent:ping\n\n");
    expect(evs.map((e) => [e.event, e.data, e.empty])).toEqual([["ping", "x\n y\n", false]]);
    const blank = new SseDecoder().push("\n\nevent: e\n\n");
    expect(blank.map((e) => [dec.decode(e.raw), e.empty])).toEqual([
      ["\n", true],
      ["\n", true],
      ["event: e\n\n", true],
    ]);
  });

  test("JSON is parsed once and on demand; text that is not JSON reads as undefined", () => {
    const [a, b] = new SseDecoder().push('data: {"usage":{"prompt_tokens":3}}\n\ndata: {nope\n\n');
    expect(a.json()).toEqual({ usage: { prompt_tokens: 3 } });
    expect(a.json()).toBe(a.json());
    expect(b.json()).toBeUndefined();
  });

  test("named is true once an event: line was read", () => {
    const d = new SseDecoder();
    d.push("data: 1\n\n");
    expect(d.named).toBe(false);
    d.push("event: message_start\n");
    expect(d.named).toBe(true);
  });

  test("bytesOf: the events of one push as one view of the input, not a copy", () => {
    const chunk = enc.encode("data: 1\n\ndata: 2\n\ndata: 3");
    const evs = new SseDecoder().push(chunk);
    const bytes = bytesOf(evs);
    expect(dec.decode(bytes)).toBe("data: 1\n\ndata: 2\n\n");
    expect(bytes.buffer).toBe(chunk.buffer);
    expect(bytesOf([]).length).toBe(0);
  });
});

describe("pipeTranslator", () => {
  /** Sends the data of every event back as one line; `done` after a `stop` event. */
  class Lines implements StreamTranslator {
    #sse = new SseDecoder();
    done = false;
    push(chunk: Uint8Array): string {
      return this.#lines(this.#sse.push(chunk));
    }
    end(): string {
      return `${this.#lines(this.#sse.end())}end\n`;
    }
    fail(message: string): string {
      return `fail ${message}\n`;
    }
    #lines(evs: SseEvent[]): string {
      return evs.map((e) => (e.data === "stop" ? ((this.done = true), "stopped\n") : `${e.data}\n`)).join("");
    }
  }
  const upstream = () => {
    let ctrl!: ReadableStreamDefaultController<Uint8Array>;
    let cancelled = false;
    const stream = new ReadableStream<Uint8Array>({
      start: (c) => void (ctrl = c),
      cancel: () => void (cancelled = true),
    });
    return { stream, ctrl, send: (s: string) => ctrl.enqueue(enc.encode(s)), cancelled: () => cancelled };
  };

  test("one chunk per read that completes something; hooks hear the first output and the end once", async () => {
    const up = upstream();
    const calls: string[] = [];
    const reader = pipeTranslator(up.stream, new Lines(), {
      onFirst: () => calls.push("first"),
      onEnd: (o) => calls.push(o),
      tee: (b) => calls.push(`tee ${b.length}`),
    }).getReader();
    up.send("data: a");
    up.send("\n\ndata: b\n\n");
    expect(dec.decode((await reader.read()).value)).toBe("a\nb\n");
    up.send("data: c");
    up.ctrl.close();
    expect(dec.decode((await reader.read()).value)).toBe("c\nend\n");
    expect((await reader.read()).done).toBe(true);
    expect(calls).toEqual(["first", "tee 4", "tee 6", "done"]);
  });

  test("a done translator closes the stream and releases upstream; a broken upstream ends with fail", async () => {
    const up = upstream();
    const reader = pipeTranslator(up.stream, new Lines()).getReader();
    up.send("data: stop\n\n");
    expect(dec.decode((await reader.read()).value)).toBe("stopped\n");
    expect((await reader.read()).done).toBe(true);
    expect(up.cancelled()).toBe(true);
    const broken = upstream();
    const ends: string[] = [];
    const r2 = pipeTranslator(broken.stream, new Lines(), {
      onEnd: (o) => ends.push(o),
      failure: (reason) => `gone (${reason})`,
    }).getReader();
    broken.ctrl.error(new Error("reset"));
    expect(dec.decode((await r2.read()).value)).toBe("fail gone (reset)\n");
    expect((await r2.read()).done).toBe(true);
    expect(ends).toEqual(["error"]);
  });

  test("a client that goes away cancels upstream (the runtime's request is cut), ending as cancelled", async () => {
    const up = upstream();
    const calls: string[] = [];
    const reader = pipeTranslator(up.stream, new Lines(), {
      onEnd: (o) => calls.push(o),
    }).getReader();
    up.send("data: a\n\n");
    await reader.read();
    await reader.cancel("gone");
    expect(calls).toEqual(["cancelled"]);
    expect(up.cancelled()).toBe(true);
  });
});

describe("meteredStream over the decoder", () => {
  /** The parts one read at a time, then a close, or `error` on the read after the last part. */
  const streamOf = (parts: Uint8Array[], error?: Error) => {
    let at = 0;
    return new ReadableStream<Uint8Array>({
      pull(c) {
        if (at < parts.length) c.enqueue(parts[at++]);
        else if (error) c.error(error);
        else c.close();
      },
    });
  };
  const run = async (parts: Uint8Array[], opts: Partial<MeterOptions> = {}, error?: Error) => {
    const chunks: Uint8Array[] = [];
    let end: { usage: Usage; outcome: string } | undefined;
    const out = meteredStream(streamOf(parts, error), {
      dropUsageOnlyChunks: false,
      onEnd: (usage, outcome) => (end = { usage, outcome }),
      ...opts,
    });
    for await (const c of out) chunks.push(c);
    return { chunks, text: chunks.map((c) => dec.decode(c)).join(""), end };
  };

  test("events it does not change go out as the runtime's own bytes; a rename re-encodes only what it changed", async () => {
    const a = enc.encode('data: {"model":"m","choices":[{"delta":{"content":"hé"}}]}\r\n\r\n');
    const plain = await run([a], { rename: (t) => t.replaceAll('"model":"x"', '"model":"y"') });
    expect(plain.chunks[0].buffer).toBe(a.buffer);
    const renamed = await run([a], { rename: (t) => t.replaceAll('"model":"m"', '"model":"tiny"') });
    expect(renamed.text).toBe(dec.decode(a).replace('"m"', '"tiny"'));
  });

  test("usage read from CRLF events split anywhere; the usage-only chunk dropped, the rest byte for byte", async () => {
    const events = [
      'data: {"choices":[{"delta":{"content":"hi"}}]}\r\n\r\n',
      'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":5}}\r\n\r\n',
      "data: [DONE]\r\n\r\n",
    ];
    const bytes = enc.encode(events.join(""));
    for (const cut of [1, 30, 60, 90, bytes.length - 1]) {
      const got = await run([bytes.subarray(0, cut), bytes.subarray(cut)], { dropUsageOnlyChunks: true });
      expect(got.text).toBe(events[0] + events[2]);
      expect(got.end).toEqual({ usage: { inputTokens: 3, outputTokens: 5 }, outcome: "done" });
    }
  });

  test("a runtime that breaks off gets an error event in its stream's dialect, even mid-way through its first event line", async () => {
    const openai = await run([enc.encode('data: {"choices":[]}\n\n')], {}, new Error("reset"));
    expect(openai.text.split("\n\n").at(-2)).toBe(
      `data: ${JSON.stringify({ error: { message: "the model runtime broke off mid-answer (reset)", type: "server_error", code: "upstream_unavailable" } })}`,
    );
    expect(openai.end?.outcome).toBe("error");
    for (const partial of ["event: message_start\ndata: {", "event: mess"]) {
      const anthropic = await run([enc.encode(partial)], {}, new Error("reset"));
      expect(anthropic.text).toStartWith("event: error\ndata: ");
    }
  });
});
