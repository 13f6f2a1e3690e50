/**
 * The JSON body a runtime gets (src/workers/fleet.ts `runtimeText`): the client's own text when the
 * runtime serves the model it names, else the body with `model` set to the served name (and a LoRA
 * adapter's selection applied). The first is what most requests take: nothing is printed again.
 */
import { describe, expect, test } from "bun:test";
import { runtimeText } from "../src/workers/fleet";

describe("the JSON body a runtime gets", () => {
  const text = '{ "model": "tiny",\n  "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8 }';
  const json = JSON.parse(text) as Record<string, unknown>;

  test("the client's text as it came when the runtime serves the model it names", () => {
    expect(runtimeText({ text }, json, "tiny")).toBe(text);
    expect(runtimeText({ text }, json, undefined)).toBe(text);
  });

  test("the served name in place of another, the rest kept; a selection applied; no text: printed", () => {
    expect(JSON.parse(runtimeText({ text }, json, "/models/tiny.gguf"))).toEqual({
      ...json,
      model: "/models/tiny.gguf",
    });
    const select = (b: Record<string, unknown>) => ({ ...b, lora: "sql" });
    expect(JSON.parse(runtimeText({ text, select }, json, "tiny"))).toEqual({ ...json, lora: "sql" });
    expect(runtimeText({}, json, "tiny")).toBe(JSON.stringify(json));
  });
});
