import { describe, expect, test } from "bun:test";
import { slugify } from "../src/ids";
import { uniqueSlug } from "../src/projects/service";
import { CommandSyntaxError, flagValue, hasFlag, joinCommand, splitCommand } from "../agent/command";
import { startTestServer } from "./helpers/server";

describe("slugs", () => {
  test.each([
    ["My Llama 3 (8B)!", "my-llama-3-8b"],
    ["  Café  Crème ", "cafe-creme"],
    ["___", "x"],
    ["a".repeat(100), "a".repeat(63)],
  ])("slugify(%j) = %j", (name, slug) => expect(slugify(name)).toBe(slug));

  test("uniqueSlug numbers collisions and refuses a taken explicit slug", async () => {
    const taken = new Set(["chat", "chat-2"]);
    expect(await uniqueSlug("Chat", undefined, async (s) => taken.has(s), "workload")).toBe("chat-3");
    expect(uniqueSlug("Chat", "chat", async (s) => taken.has(s), "workload")).rejects.toThrow(
      'workload slug "chat" is already taken',
    );
  });
});

describe("command lines", () => {
  test.each([
    [`vllm serve "my model" --port=8000`, ["vllm", "serve", "my model", "--port=8000"]],
    [`llama-server -m '/models/a b.gguf'   -c 2048`, ["llama-server", "-m", "/models/a b.gguf", "-c", "2048"]],
    [`a\\ b "x\\"y" ''`, ["a b", 'x"y', ""]],
    ["vllm serve m \\\n  --tp 2", ["vllm", "serve", "m", "--tp", "2"]],
  ])("splitCommand(%j)", (cmd, words) => expect(splitCommand(cmd)).toEqual(words));

  test("unbalanced quotes and a trailing backslash are syntax errors", () => {
    expect(() => splitCommand(`vllm "serve`)).toThrow(CommandSyntaxError);
    expect(() => splitCommand(`vllm serve \\`)).toThrow(CommandSyntaxError);
  });

  test("joinCommand round-trips through splitCommand", () => {
    const words = ["vllm", "serve", "my model", "it's", "--x=1", ""];
    expect(splitCommand(joinCommand(words))).toEqual(words);
  });

  test("flags in both forms", () => {
    expect(flagValue(["--port", "9"], ["--port"])).toBe("9");
    expect(flagValue(["--port=9"], ["--port"])).toBe("9");
    expect(flagValue(["-tp", "2"], ["--tensor-parallel-size", "-tp"])).toBe("2");
    expect(flagValue(["--portx=9"], ["--port"])).toBeUndefined();
    expect(hasFlag(["--tensor-parallel-size=4"], ["--tensor-parallel-size"])).toBe(true);
  });
});

describe("OpenAPI", () => {
  test("/docs/json describes the control plane and admin routes", async () => {
    const s = await startTestServer();
    try {
      const doc = await (await fetch(`${s.url}/docs/json`)).json();
      expect(doc.openapi).toMatch(/^3\./);
      expect(Object.keys(doc.paths)).toEqual(
        expect.arrayContaining(["/api/projects/{project_id}/workloads", "/api/workloads/{id}", "/admin/projects"]),
      );
      const create = doc.paths["/api/projects/{project_id}/workloads"].post;
      expect(JSON.stringify(create.requestBody)).toContain("model_name");
    } finally {
      await s.close();
    }
  });
});
