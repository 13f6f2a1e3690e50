/**
 * Ready-to-copy client snippets (curl, OpenAI SDK for Python and JavaScript, or plain HTTP for jobs)
 * for one workload, by task type: through the project's base URL (routed by `model`) first, then
 * through the workload's own base URL.
 */
import { html } from "htm/preact";
import { CodeBlock } from "./ui";
import { clientOrigin, ListenNote, useListen } from "./listen-note";

/** The OpenAI-compatible base URL of a workload on the server at `origin`. */
export const baseUrl = (origin: string, project: string, workload: string) =>
  `${origin}/endpoint/${project}/${workload}/v1`;

/** The project's OpenAI-compatible base URL on the server at `origin`: one for every model of the project, routed by `model`. */
export const projectBaseUrl = (origin: string, project: string) => `${origin}/endpoint/${project}/v1`;

/** What a snippet's workload needs: where it is, its task type and (for the project base) the model name clients send. */
export interface SnippetWorkload {
  project_slug: string;
  slug: string;
  task_type: string;
  model_name?: string;
}

/** One way to call a workload: the route under its base URL and the request in each client. */
interface Call {
  /** The curl arguments after the URL and the key (a JSON body, or form fields for a file). */
  curl: string;
  /** The route after the workload's base (`/v1/…`, or `/jobs` for async-only task types). */
  route: string;
  /** Python and JavaScript after the client is made (`client` is an OpenAI client, or plain HTTP for jobs). */
  python: string;
  js: string;
  /** What the reader needs to know (a file to supply, a body the runtime defines). */
  note?: string;
}

/** A word for a POSIX shell, single-quoted. */
const shellWord = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;
const jsonArgs = (o: unknown) => `-H "Content-Type: application/json" \\\n  -d ${shellWord(JSON.stringify(o))}`;
const SAVE_IMAGE_PY = `with open("image.png", "wb") as f:\n    f.write(base64.b64decode(result.data[0].b64_json))`;
const SAVE_IMAGE_JS = `writeFileSync("image.png", Buffer.from(result.data[0].b64_json, "base64"));`;

/** A job for a task type served only through async jobs: submit it, then read it by id. */
function jobCall(kind: string, body: unknown, jobsUrl: string, note?: string): Call {
  const envelope = { kind, body };
  return {
    route: "/jobs",
    curl: jsonArgs(envelope),
    python: `import requests\n\njob = requests.post("${jobsUrl}", headers=headers, json=${JSON.stringify(envelope)}).json()\nprint(requests.get(f"${jobsUrl}/{job['job_id']}", headers=headers).json())`,
    js: `const job = await (await fetch("${jobsUrl}", { method: "POST", headers: { ...headers, "content-type": "application/json" }, body: JSON.stringify(${JSON.stringify(envelope)}) })).json();\nconsole.log(await (await fetch(\`${jobsUrl}/\${job.job_id}\`, { headers })).json());`,
    note:
      note ??
      "This task type is served through async jobs: the answer is the job's 202 with its id; the result comes to your webhooks and from the job's URL.",
  };
}

/**
 * How a workload of each task type is called (chat for text and vision chat, the default). `model`
 * is the name the project base routes by; on the workload's own base it is left out ("default").
 */
function callFor(taskType: string, jobsUrl: string, model?: string): Call {
  const m = JSON.stringify(model ?? "default");
  const json = (o: Record<string, unknown>) => jsonArgs(model ? { model, ...o } : o);
  switch (taskType) {
    case "embedding":
      return {
        route: "/v1/embeddings",
        curl: json({ input: "Hello from inferd" }),
        python: `result = client.embeddings.create(model=${m}, input="Hello from inferd")\nprint(len(result.data[0].embedding))`,
        js: `const result = await client.embeddings.create({ model: ${m}, input: "Hello from inferd" });\nconsole.log(result.data[0].embedding.length);`,
      };
    case "text2image":
    case "text2video":
      return {
        route: "/v1/images/generations",
        curl: json({ prompt: "A lighthouse at dusk" }),
        python: `import base64\n\nresult = client.images.generate(model=${m}, prompt="A lighthouse at dusk")\n${SAVE_IMAGE_PY}`,
        js: `import { writeFileSync } from "node:fs";\n\nconst result = await client.images.generate({ model: ${m}, prompt: "A lighthouse at dusk" });\n${SAVE_IMAGE_JS}`,
      };
    case "image2image":
      return {
        route: "/v1/images/edits",
        curl: `${model ? `-F ${shellWord(`model=${model}`)} \\\n  ` : ""}-F image=@input.png \\\n  -F prompt="The same scene at night"`,
        python: `import base64\n\nresult = client.images.edit(model=${m}, image=open("input.png", "rb"), prompt="The same scene at night")\n${SAVE_IMAGE_PY}`,
        js: `import { createReadStream, writeFileSync } from "node:fs";\n\nconst result = await client.images.edit({ model: ${m}, image: createReadStream("input.png"), prompt: "The same scene at night" });\n${SAVE_IMAGE_JS}`,
        note: "Put the picture to edit in input.png.",
      };
    case "text2audio":
      return {
        route: "/v1/audio/speech",
        curl: `${json({ input: "Hello from inferd", voice: "alloy" })} \\\n  --output speech.wav`,
        python: `with client.audio.speech.with_streaming_response.create(model=${m}, voice="alloy", input="Hello from inferd") as speech:\n    speech.stream_to_file("speech.wav")`,
        js: `import { writeFileSync } from "node:fs";\n\nconst speech = await client.audio.speech.create({ model: ${m}, voice: "alloy", input: "Hello from inferd" });\nwriteFileSync("speech.wav", Buffer.from(await speech.arrayBuffer()));`,
      };
    case "audio2text":
      return {
        route: "/v1/audio/transcriptions",
        curl: `-F ${shellWord(`model=${model ?? "default"}`)} \\\n  -F file=@audio.wav`,
        python: `text = client.audio.transcriptions.create(model=${m}, file=open("audio.wav", "rb"))\nprint(text.text)`,
        js: `import { createReadStream } from "node:fs";\n\nconst text = await client.audio.transcriptions.create({ model: ${m}, file: createReadStream("audio.wav") });\nconsole.log(text.text);`,
        note: "Put the recording to transcribe in audio.wav.",
      };
    case "forecast": {
      const forecast = { ...(model ? { model } : {}), series: [12, 15, 14, 18, 21], horizon: 3 };
      return {
        route: "/v1/forecast",
        curl: jsonArgs(forecast),
        python: `import requests\n\nprint(requests.post(str(client.base_url) + "forecast", headers={"Authorization": f"Bearer {client.api_key}"}, json=${JSON.stringify(forecast)}).json())`,
        js: `const r = await fetch(client.baseURL + "/forecast", { method: "POST", headers: { authorization: \`Bearer \${client.apiKey}\`, "content-type": "application/json" }, body: JSON.stringify(${JSON.stringify(forecast)}) });\nconsole.log(await r.json());`,
        note: `The request body is your forecasting runtime's own; inferd forwards it as it is${model ? " (the project base reads its model to route it)" : ""}.`,
      };
    }
    case "reranker":
      return jobCall(
        "rerank",
        { query: "What is inferd?", documents: ["inferd serves models on your GPUs.", "Bread needs flour."] },
        jobsUrl,
      );
    case "classification":
    case "reward":
      return jobCall(
        "embeddings",
        { input: "Text to score" },
        jobsUrl,
        "This task type is served through async jobs of the kind your runtime answers (embeddings here; see the kinds in the README); the result comes to your webhooks and from the job's URL.",
      );
    case "image2text":
      return {
        route: "/v1/chat/completions",
        curl: json({
          messages: [
            {
              role: "user",
              content: [
                { type: "text", text: "What is in this picture?" },
                { type: "image_url", image_url: { url: "https://example.com/picture.png" } },
              ],
            },
          ],
        }),
        python: `reply = client.chat.completions.create(\n    model=${m},\n    messages=[{"role": "user", "content": [\n        {"type": "text", "text": "What is in this picture?"},\n        {"type": "image_url", "image_url": {"url": "https://example.com/picture.png"}},\n    ]}],\n)\nprint(reply.choices[0].message.content)`,
        js: `const reply = await client.chat.completions.create({\n  model: ${m},\n  messages: [{ role: "user", content: [\n    { type: "text", text: "What is in this picture?" },\n    { type: "image_url", image_url: { url: "https://example.com/picture.png" } },\n  ] }],\n});\nconsole.log(reply.choices[0].message.content);`,
        note: "The picture may also be a data: URL with the image in base64.",
      };
    default:
      return {
        route: "/v1/chat/completions",
        curl: json({ messages: [{ role: "user", content: "Say hello" }] }),
        python: `reply = client.chat.completions.create(\n    model=${m},\n    messages=[{"role": "user", "content": "Say hello"}],\n)\nprint(reply.choices[0].message.content)`,
        js: `const reply = await client.chat.completions.create({\n  model: ${m},\n  messages: [{ role: "user", content: "Say hello" }],\n});\nconsole.log(reply.choices[0].message.content);`,
      };
  }
}

/** Whether a task type is served only through async jobs (on the workload's own base, never the project's). */
const jobOnly = (taskType: string) => callFor(taskType, "").route === "/jobs";

/**
 * The snippets for a workload, fitted to its task type (chat, embeddings, images, audio, forecast,
 * or an async job for job-only types); `secret` fills in the key, else an environment variable is
 * used; `origin` is the server's client URL. With `model`: through the project's base URL, routed by it.
 */
function snippetsOn(w: SnippetWorkload, secret: string | undefined, origin: string, model?: string) {
  const base = model !== undefined ? projectBaseUrl(origin, w.project_slug) : baseUrl(origin, w.project_slug, w.slug);
  const jobsUrl = `${origin}/endpoint/${w.project_slug}/${w.slug}/jobs`;
  const call = callFor(w.task_type, jobsUrl, model);
  const keyShell = secret ?? "$INFERD_API_KEY";
  const url = call.route === "/jobs" ? jobsUrl : `${base}${call.route.slice(3)}`;
  const curl = `curl ${url} \\\n  -H "Authorization: Bearer ${keyShell}" \\\n  ${call.curl}`;
  const pyKey = secret ? JSON.stringify(secret) : `os.environ["INFERD_API_KEY"]`;
  const jsKey = secret ? JSON.stringify(secret) : "process.env.INFERD_API_KEY";
  const pyEnv = secret ? "" : "import os\n";
  const jobs = call.route === "/jobs";
  const python = jobs
    ? `${pyEnv}${call.python.replace("import requests\n\n", `import requests\n\nheaders = {"Authorization": "Bearer " + ${pyKey}}\n`)}`
    : `${pyEnv}from openai import OpenAI\n\nclient = OpenAI(base_url="${base}", api_key=${pyKey})\n${call.python}`;
  const imports = call.js.startsWith("import ") ? `${call.js.slice(0, call.js.indexOf("\n\n") + 1)}` : "";
  const jsBody = imports ? call.js.slice(imports.length + 1) : call.js;
  const js = jobs
    ? `const headers = { authorization: \`Bearer \${${jsKey}}\` };\n${call.js}`
    : `${imports}import OpenAI from "openai";\n\nconst client = new OpenAI({ baseURL: "${base}", apiKey: ${jsKey} });\n${jsBody}`;
  return { base, curl, python, js, note: call.note, http: jobs };
}

/** The snippets for a workload through its own base URL (`model` left out). */
export const snippets = (w: SnippetWorkload, secret?: string, origin = location.origin) =>
  snippetsOn(w, secret, origin);

/**
 * The snippets for a workload through the project's base URL, its model name as `model`
 * (undefined for job-only task types: that base serves no jobs).
 */
export const projectSnippets = (w: SnippetWorkload, secret?: string, origin = location.origin) =>
  jobOnly(w.task_type) ? undefined : snippetsOn(w, secret, origin, w.model_name ?? w.slug);

/** One set of snippets (curl, Python, JavaScript) as copyable code blocks. */
export function SnippetBlocks({ s }: { s: ReturnType<typeof snippets> }) {
  return html`<${CodeBlock} label="curl" code=${s.curl} />
    ${s.note ? html`<p class="muted" data-testid="snippet-note">${s.note}</p>` : null}
    <${CodeBlock} label=${s.http ? "Python (requests)" : "OpenAI SDK (Python)"} code=${s.python} />
    <${CodeBlock} label=${s.http ? "JavaScript (fetch)" : "OpenAI SDK (JavaScript)"} code=${s.js} />`;
}

/**
 * How to call a workload: through the project's base URL first (the workload's model name as
 * `model`), then through the workload's own base URL; job-only task types get only the latter.
 */
export function Snippets({ workload, secret }: { workload: SnippetWorkload; secret?: string }) {
  const listen = useListen();
  const origin = clientOrigin(listen);
  const viaProject = projectSnippets(workload, secret, origin);
  const own = snippets(workload, secret, origin);
  return html`<div class="snippets">
    <${ListenNote} listen=${listen} lan="Other machines on your network reach inferd at" />
    ${secret ? null : html`<p class="muted">Set <code>INFERD_API_KEY</code> to a live key of this project (create one under Keys).</p>`}
    ${
      viaProject
        ? html`<section class="snippet-group" data-testid="project-snippets" aria-label="Through the project's base URL">
      <h3>Through the project's base URL</h3>
      <p class="muted">One base URL for every model of the project: <code class="wrap" data-testid="project-base">${viaProject.base}</code>. The <code>model</code> you send picks the workload: <code>${workload.model_name ?? workload.slug}</code> here.</p>
      <${SnippetBlocks} s=${viaProject} />
    </section>`
        : null
    }
    <section class="snippet-group" data-testid="workload-snippets" aria-label="Through this workload's own base URL">
      <h3>${viaProject ? "Or through this workload's own base URL" : "Through this workload's own base URL"}</h3>
      <p class="muted">${own.http ? "Async jobs go to the workload's own URL" : html`This workload alone: <code class="wrap">${own.base}</code>; <code>model</code> may be left out`}.</p>
      <${SnippetBlocks} s=${own} />
    </section>
  </div>`;
}

/**
 * The Anthropic SDK (Python and JavaScript) on a project: its base URL is the project's endpoint
 * without `/v1` (the SDK appends `/v1/messages`), and it sends the key as `x-api-key`, which inferd's
 * Messages route accepts. `key` is written in as it is (a secret, or a placeholder to replace).
 * @example anthropicSnippets("http://10.0.0.5:8080", "acme", "qwen", "sk-1").python // → "import anthropic\n\nclient = anthropic.Anthropic(base_url=…"
 */
export function anthropicSnippets(origin: string, project: string, model: string, key: string) {
  const base = `${origin}/endpoint/${project}`;
  const m = JSON.stringify(model);
  return {
    base,
    python: `import anthropic\n\nclient = anthropic.Anthropic(base_url="${base}", api_key=${JSON.stringify(key)})\nreply = client.messages.create(\n    model=${m},\n    max_tokens=256,\n    messages=[{"role": "user", "content": "Say hello"}],\n)\nprint(reply.content[0].text)`,
    js: `import Anthropic from "@anthropic-ai/sdk";\n\nconst client = new Anthropic({ baseURL: "${base}", apiKey: ${JSON.stringify(key)} });\nconst reply = await client.messages.create({\n  model: ${m},\n  max_tokens: 256,\n  messages: [{ role: "user", content: "Say hello" }],\n});\nconsole.log(reply.content[0].type === "text" ? reply.content[0].text : reply.content[0]);`,
  };
}
