import { describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { servedUi } from "../helpers/ui-suite";
import { tempDir } from "../helpers/proc";
import { textMatching, until } from "../helpers/browser";
import { writeTinyGguf } from "../fixtures/gguf";

/**
 * The workload form turns the task type into the command against a real `inferd serve` (fake
 * runtimes and GPUs): Embeddings on llama.cpp adds `--embeddings` (and takes it away again, never a
 * flag the user typed), vision adds the projector found beside the model; vLLM's model is typed once,
 * in its command; a missing piece is explained next to its field, never in a browser bubble; a link
 * with `?model=…&backend=…&task=…` opens the form filled.
 */
const world = servedUi();

/** The form's command, as the textarea holds it. */
const commandOf = () => world.ui.page.getByRole("textbox", { name: /^Command/ }).inputValue();

describe("the workload form and the task type", () => {
  test("Embeddings on llama.cpp adds --embeddings; another task takes it away; a typed flag stays", async () => {
    const { page } = world.ui;
    await world.ui.visit(`/projects/${world.srv.project}/workloads/new`);
    await page.getByRole("textbox", { name: /^GGUF file or Hugging Face model/ }).fill("someone/Tiny-Embed-GGUF:Q8_0");
    expect(await commandOf()).toBe("llama-server -hf someone/Tiny-Embed-GGUF:Q8_0 -c 4096");
    const task = page.getByRole("combobox", { name: "Task type" });
    await task.selectOption({ label: "Embeddings" });
    expect(await commandOf()).toBe("llama-server -hf someone/Tiny-Embed-GGUF:Q8_0 -c 4096 --embeddings");
    await page.getByTestId("task-flag").filter({ hasText: "Added for this task type: --embeddings" }).waitFor();
    await task.selectOption({ label: "Reranking (jobs only)" });
    expect(await commandOf()).toBe("llama-server -hf someone/Tiny-Embed-GGUF:Q8_0 -c 4096 --reranking");
    await task.selectOption({ label: "Chat / text generation" });
    expect(await commandOf()).toBe("llama-server -hf someone/Tiny-Embed-GGUF:Q8_0 -c 4096");
    // A flag the user typed is theirs: changing the task leaves it.
    await page
      .getByRole("textbox", { name: /^Command/ })
      .fill("llama-server -hf someone/Tiny-Embed-GGUF:Q8_0 -c 2048 --embeddings");
    await task.selectOption({ label: "Embeddings" });
    await task.selectOption({ label: "Chat / text generation" });
    expect(await commandOf()).toBe("llama-server -hf someone/Tiny-Embed-GGUF:Q8_0 -c 2048 --embeddings");
  });

  test("a command without its task's flag is explained at the field, before saving and as the server says it", async () => {
    const { page } = world.ui;
    await world.ui.visit(`/projects/${world.srv.project}/workloads/new`);
    await page.getByLabel("Name", { exact: true }).fill("Vectors");
    await page.getByRole("textbox", { name: /^GGUF file or Hugging Face model/ }).fill("someone/Tiny-Embed-GGUF:Q8_0");
    await page.getByRole("combobox", { name: "Task type" }).selectOption({ label: "Embeddings" });
    await page.getByRole("textbox", { name: /^Command/ }).fill("llama-server -hf someone/Tiny-Embed-GGUF:Q8_0 -c 4096");
    await page.getByRole("button", { name: "Create workload" }).click();
    const note = page.locator("#error-config-command");
    await note.filter({ hasText: "An embeddings workload on llama.cpp needs --embeddings in its command" }).waitFor();
    expect(await page.getByRole("textbox", { name: /^Command/ }).getAttribute("aria-invalid")).toBe("true");
    await world.ui.checkWidths("workload-task-error");
    const count = (await (await world.srv.admin(`/admin/projects/${world.srv.project}/workloads`)).json()).length;
    expect(count).toBe(0);
  });

  test("vision on llama.cpp adds the projector found beside the model", async () => {
    const { page } = world.ui;
    const dir = tempDir("vision");
    const model = join(dir, "Tiny-VL-Q8_0.gguf");
    writeTinyGguf(model, { seed: 9 });
    writeFileSync(join(dir, "mmproj-Tiny-VL-F16.gguf"), "GGUF");
    await world.ui.visit(`/projects/${world.srv.project}/workloads/new`);
    await page.getByRole("textbox", { name: /^GGUF file or Hugging Face model/ }).fill(model);
    await page.getByRole("combobox", { name: "Task type" }).selectOption({ label: "Vision chat" });
    await until(
      async () =>
        (await commandOf()) === `llama-server -m ${model} -c 4096 --mmproj ${join(dir, "mmproj-Tiny-VL-F16.gguf")}`,
      "the projector in the command",
    );
    // A hub model not pulled yet: the placeholder, and a note saying to put the projector's path there.
    await page.getByRole("textbox", { name: /^GGUF file or Hugging Face model/ }).fill("someone/Tiny-VL-GGUF:Q8_0");
    expect(await commandOf()).toBe("llama-server -hf someone/Tiny-VL-GGUF:Q8_0 -c 4096 --mmproj /path/to/mmproj.gguf");
    await page
      .getByTestId("task-flag")
      .filter({ hasText: "no projector (mmproj-….gguf) is known beside this model" })
      .waitFor();
    await world.ui.checkWidths("workload-vision");
  });

  test("vLLM's model is typed once, in its command; a command without one is an inline error, not a bubble", async () => {
    const { page } = world.ui;
    await world.ui.visit(`/projects/${world.srv.project}/workloads/new`);
    await page.getByRole("radio", { name: /^vLLM A Hugging Face/ }).check();
    expect(await page.getByRole("textbox", { name: /^Model name/ }).count()).toBe(0);
    await page.getByLabel("Name", { exact: true }).fill("Embedder");
    await page.getByRole("button", { name: "Create workload" }).click();
    await page
      .locator("#error-config-command")
      .filter({ hasText: "Name the model to serve in the command, e.g. vllm serve Qwen/Qwen3-8B." })
      .waitFor();
    // Nothing of the form is left to the browser's own validation (no bubble can pop up).
    expect(await page.locator("form :invalid").count()).toBe(0);
    expect(await page.locator("form [required]").count()).toBe(0);
    await world.ui.checkWidths("workload-vllm-error");
    await page.getByRole("combobox", { name: "Task type" }).selectOption({ label: "Embeddings" });
    await page.getByRole("textbox", { name: /^Command/ }).fill("vllm serve org/embed-small");
    await page.getByTestId("served-name").filter({ hasText: "Clients send org/embed-small as the model" }).waitFor();
    await textMatching(
      page.getByTestId("launch-command"),
      /^vllm serve org\/embed-small --tensor-parallel-size 1/,
      "the launch preview",
    );
    await page.getByRole("button", { name: "Create workload" }).click();
    await page.getByRole("heading", { name: "Embedder" }).waitFor();
    const made = (await (await world.srv.admin(`/admin/projects/${world.srv.project}/workloads`)).json()) as {
      name: string;
      model_name: string;
      task_type: string;
      config: { command: string };
    }[];
    expect(made.find((w) => w.name === "Embedder")).toMatchObject({
      model_name: "org/embed-small",
      task_type: "embedding",
      config: { command: "vllm serve org/embed-small" },
    });
    world.ui.expectNoErrors("vLLM embeddings");
  });

  test("a link with ?model=…&backend=llamacpp&task=embeddings opens the form filled, the command built from it", async () => {
    const { page } = world.ui;
    await world.ui.visit(
      `/projects/${world.srv.project}/workloads/new?model=${encodeURIComponent("hf:someone/Tiny-Embed-GGUF:Q8_0")}&backend=llamacpp&task=embeddings`,
    );
    expect(await page.getByRole("radio", { name: /^llama\.cpp/ }).isChecked()).toBe(true);
    expect(await page.getByRole("textbox", { name: /^GGUF file or Hugging Face model/ }).inputValue()).toBe(
      "hf:someone/Tiny-Embed-GGUF:Q8_0",
    );
    expect(await page.getByRole("combobox", { name: "Task type" }).inputValue()).toBe("embedding");
    expect(await page.getByLabel("Name", { exact: true }).inputValue()).toBe("Tiny-Embed");
    expect(await commandOf()).toBe("llama-server -hf someone/Tiny-Embed-GGUF:Q8_0 -c 4096 --embeddings");
    await world.ui.checkWidths("workload-prefilled");
    await world.ui.visit(`/projects/${world.srv.project}/workloads/new?model=Qwen/Qwen3-8B&backend=vllm`);
    expect(await commandOf()).toBe("vllm serve Qwen/Qwen3-8B");
    await page.getByTestId("served-name").filter({ hasText: "Clients send Qwen/Qwen3-8B as the model" }).waitFor();
  });
});
