import { describe, expect, test } from "bun:test";
import { lastLine, percentIn, timeStamper } from "../ui/lib/logs";
import { withoutOutput } from "../agent/reason";
import { ApiError } from "../ui/lib/api";
import { fieldWords, messageAt, plainMessage } from "../ui/components/ui";
import { markdownToHtml } from "../ui/lib/markdown";

/** Pure helpers of the log viewer and the replica's log notes. */
describe("log lines", () => {
  const at = new Date(2026, 0, 2, 9, 8, 7).getTime();
  const T = "\x1b[2m09:08:07\x1b[22m ";

  test("timeStamper puts the arrival time before each line, across chunks, and before a \\r-redrawn bar", () => {
    const stamp = timeStamper();
    expect(stamp("a\r\nb", at)).toBe(`${T}a\r\n${T}b`);
    expect(stamp("c\r\n", at)).toBe("c\r\n");
    expect(stamp("\rLoading 10%\rLoading 20%", at)).toBe(`\r${T}Loading 10%\r${T}Loading 20%`);
    expect(stamp("\r\n\r\n", at)).toBe("\r\n\r\n");
  });

  test("lastLine keeps the latest drawing of a bar", () => {
    expect(lastLine("x\r\n\rLoading 10%\rLoading 20%\r\n")).toBe("Loading 20%");
  });

  test("percentIn finds the last percentage a line printed, ignoring numbers past 100", () => {
    expect(percentIn("pulling 6a0746a1ec1a:  28% ▕███  ▏ 1.3 GB/4.7 GB")).toBe(28);
    expect(percentIn("Loading safetensors checkpoint shards:  40% Completed | 2/5")).toBe(40);
    expect(percentIn("step 1 of 3: 12.5 %, then 250%")).toBe(12.5);
    expect(percentIn("INFO ready")).toBeNull();
  });

  test("withoutOutput drops the runtime output a supervisor's reason quotes", () => {
    expect(withoutOutput("vllm exited with code 1; restarting in 100 ms\n--- last output ---\nboom")).toBe(
      "vllm exited with code 1; restarting in 100 ms",
    );
    expect(withoutOutput("command not found: vllm")).toBe("command not found: vllm");
  });
});

describe("form errors in plain words", () => {
  const quote = new ApiError(
    400,
    "validation_error",
    "config.command: the command has an unclosed double quote",
    "config.command",
  );

  test("the API's field path is dropped and the sentence starts with a capital", () => {
    expect(plainMessage(quote)).toBe("The command has an unclosed double quote");
    expect(plainMessage(new ApiError(409, "slug_taken", 'workload slug "x" is already taken', "slug"))).toBe(
      'Workload slug "x" is already taken',
    );
    expect(plainMessage(new ApiError(404, "not_found", "project not found"))).toBe("Project not found");
  });

  test("a message belongs to the field it names only", () => {
    expect(messageAt(quote, "config.command")).toBe("The command has an unclosed double quote");
    expect(messageAt(quote, "model_name")).toBeUndefined();
  });

  test("a field's path in words, for the summary", () => {
    expect(fieldWords("execution_params.max_replicas")).toBe("Max replicas");
    expect(fieldWords("execution_params.windows.0.days")).toBe("Days");
  });
});

/** A model's raw HTML never reaches an HTML parser: marked escapes it before DOMPurify sees anything. */
describe("answers as Markdown", () => {
  test("raw HTML, inline or as a block, comes out as escaped text", () => {
    expect(markdownToHtml("**hi** <b>x</b>")).toBe("<p><strong>hi</strong> &lt;b&gt;x&lt;/b&gt;</p>\n");
    const evil = markdownToHtml(`<img src=x onerror="alert(1)"> <script>alert(2)</script>`);
    expect(evil).not.toContain("<img");
    expect(evil).not.toContain("<script");
    expect(evil).toContain("&lt;img src=x onerror=&quot;alert(1)&quot;&gt;");
    expect(markdownToHtml("<div>\nblock\n</div>\n\ntext")).toBe(
      "<p>&lt;div&gt;<br>block<br>&lt;/div&gt;</p>\n<p>text</p>\n",
    );
  });

  test("Markdown itself still renders: code, links, and images as links that are never loaded", () => {
    expect(markdownToHtml("`<b>`")).toBe("<p><code>&lt;b&gt;</code></p>\n");
    expect(markdownToHtml("[site](https://example.com/)")).toBe(`<p><a href="https://example.com/">site</a></p>\n`);
    expect(markdownToHtml("![a cat](https://example.com/c.png)")).toBe(
      `<p><a href="https://example.com/c.png">a cat</a></p>\n`,
    );
  });
});
